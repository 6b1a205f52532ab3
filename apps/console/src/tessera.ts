import {
  createClient,
  hasLocalStorage,
  localStorageStorage,
  memoryStorage,
  type TesseraClient,
} from '@tessera/client';

export type Tessera = TesseraClient;

/**
 * Where the tokens live in localStorage, shared by every tab of the origin. A browser that blocks
 * storage (every cookie blocked) keeps them in the page instead: signed in until it is closed.
 */
const TOKENS_KEY = 'tessera.console.tokens';

/**
 * The console's one client. Same origin as the API unless the build says otherwise
 * (`VITE_TESSERA_URL`, for a console hosted apart from the gateway, which must then allow its origin
 * in CORS_ORIGINS). `onSignedIn` hears of every sign-in and sign-out, this tab's and other tabs'.
 */
export function connect(onSignedIn: (signedIn: boolean) => void): Tessera {
  return createClient({
    baseUrl: import.meta.env.VITE_TESSERA_URL ?? window.location.origin,
    storage: hasLocalStorage() ? localStorageStorage(TOKENS_KEY) : memoryStorage(),
    onSessionChange: (tokens) => onSignedIn(tokens !== null),
  });
}
