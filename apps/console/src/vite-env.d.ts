/// <reference types="vite/client" />

interface ImportMetaEnv {
  /** Where the API is, when the console is not served by the gateway itself. */
  readonly VITE_TESSERA_URL?: string;
}
