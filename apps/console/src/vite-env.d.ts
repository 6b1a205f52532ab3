/// <reference types="vite/client" />

interface ImportMetaEnv {
  /** Where the API is, when the console is not served by the gateway itself. */
  readonly VITE_TESSERA_URL?: string;
}

/** punycode.js ships no types: the one function the console uses. */
declare module 'punycode.js' {
  export function toUnicode(domain: string): string;
}
