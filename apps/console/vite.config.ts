import { defineConfig } from 'vite';

/** Where `pnpm dev` sends API calls: the gateway that `pnpm dev` runs beside Vite, on its `PORT`. */
const gateway = process.env.TESSERA_GATEWAY_URL ?? `http://127.0.0.1:${process.env.PORT || 3000}`;

// Served by the gateway at /account/ (CONSOLE_BASE builds it for another path). Every asset is a file
// of its own, named after its content: the page's Content-Security-Policy allows no inline code or data URL.
export default defineConfig({
  base: process.env.CONSOLE_BASE ?? '/account/',
  oxc: { jsx: { runtime: 'automatic', importSource: 'preact' } },
  build: {
    target: 'es2022',
    assetsInlineLimit: 0,
    modulePreload: { polyfill: false },
    reportCompressedSize: true,
    // The notices of the libraries bundled in (Preact's MIT licence), beside the page's files.
    license: { fileName: 'third-party-licenses.md' },
  },
  server: { proxy: { '/api': gateway } },
  preview: { proxy: { '/api': gateway } },
});
