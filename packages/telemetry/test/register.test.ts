import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { expect, it } from 'vitest';

const register = new URL('../src/register.ts', import.meta.url).href;
// Records every module the process loads, before register.ts runs.
const recordLoads = `data:text/javascript,${encodeURIComponent(
  'import { registerHooks } from "node:module"; globalThis.loaded = []; ' +
    'registerHooks({ load(url, context, next) { globalThis.loaded.push(url); return next(url, context); } });',
)}`;
// A span as the HTTP instrumentation would start one, then what the process loaded.
const script = `
  import { trace } from '@opentelemetry/api';
  const span = trace.getTracer('test').startSpan('request');
  const packages = new Set(globalThis.loaded.map((url) => /node_modules\\/(@opentelemetry\\/[^/]+)/.exec(url)?.[1]).filter(Boolean));
  console.log(JSON.stringify({ span: span.spanContext(), recording: span.isRecording(), packages: [...packages] }));
`;

async function start(env: Record<string, string>) {
  const { stdout } = await promisify(execFile)(
    process.execPath,
    ['--import', recordLoads, '--import', register, '--input-type=module', '--eval', script],
    { cwd: new URL('..', import.meta.url), env: { PATH: process.env.PATH ?? '', ...env } },
  );
  return JSON.parse(stdout) as {
    span: { traceId: string; spanId: string };
    recording: boolean;
    packages: string[];
  };
}

it('without an exporter the SDK is not loaded, yet spans get trace ids for logs and jobs', async () => {
  const quiet = await start({});
  expect(quiet.span.traceId).toMatch(/^(?!0{32})[0-9a-f]{32}$/);
  expect(quiet.recording).toBe(false);
  expect(quiet.packages).not.toContain('@opentelemetry/sdk-node');
  expect(quiet.packages.filter((name) => name.startsWith('@opentelemetry/instrumentation'))).toEqual([]);
  expect(quiet.packages.filter((name) => /exporter-(trace|zipkin)/.test(name))).toEqual([]);

  const exporting = await start({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:9' });
  expect(exporting.recording).toBe(true);
  expect(exporting.packages).toContain('@opentelemetry/sdk-node');
  expect(exporting.packages).toContain('@opentelemetry/instrumentation-http');
});
