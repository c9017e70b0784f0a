import { defineConfig } from 'vite';
import { svelte } from '@sveltejs/vite-plugin-svelte';

// The dashboard is served by gatehouse under /ui/ from dist/, which is
// committed: `make ui` rebuilds it and `make test` fails when it is stale,
// so the build must be reproducible (no timestamps, content-hashed names).
export default defineConfig({
  base: '/ui/',
  plugins: [svelte()],
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    target: 'es2022',
    // No inline script anywhere: the CSP allows only 'self'.
    modulePreload: { polyfill: false },
    assetsInlineLimit: 0,
    reportCompressedSize: false,
    chunkSizeWarningLimit: 300,
  },
  server: {
    // `npm run dev` against a gateway on :8080.
    proxy: { '/admin': 'http://127.0.0.1:8080', '/ui/api': 'http://127.0.0.1:8080' },
  },
});
