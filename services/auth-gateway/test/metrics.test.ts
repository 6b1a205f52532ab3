import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { manualClock, post, signIn, startGateway, type TestGateway } from './helpers.ts';

// Metrics are process-wide: this file runs one gateway, and reads counters as differences.
const clock = manualClock();
let gateway: TestGateway;
beforeAll(async () => {
  gateway = await startGateway({}, { clock });
});
afterAll(() => gateway.close());

async function scrape(): Promise<string> {
  const response = await gateway.app.inject({ url: '/metrics' });
  expect(response.statusCode).toBe(200);
  expect(response.headers['content-type']).toMatch(/^text\/plain/);
  return response.body;
}

/** The value of one series, 0 when it has not appeared yet. */
function value(text: string, series: string): number {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line ? Number(line.slice(series.length + 1).split(' ')[0]) : 0;
}

describe('GET /metrics', () => {
  it('counts codes, verifications, refreshes and ended sessions by result', async () => {
    const before = await scrape();
    const { refreshToken, code } = await signIn(gateway.app, 'metrics@example.com');
    await post(gateway.app, '/api/v1/auth/verify-otp-email', { email: 'metrics@example.com', code });
    const rotated = await post(gateway.app, '/api/v1/auth/refresh-token', { refreshToken });
    await post(gateway.app, '/api/v1/auth/refresh-token', { refreshToken });
    clock.advance(gateway.config.REFRESH_REUSE_GRACE + 1);
    await post(gateway.app, '/api/v1/auth/refresh-token', { refreshToken });
    await post(gateway.app, '/api/v1/auth/refresh-token', { refreshToken: 'x'.repeat(43) });
    expect(rotated.statusCode).toBe(200);
    const after = await scrape();

    const delta = (series: string) => value(after, series) - value(before, series);
    expect(delta('tessera_codes_sent_total')).toBe(1);
    expect(delta('tessera_verifications_total{result="ok"}')).toBe(1);
    expect(delta('tessera_verifications_total{result="expired"}')).toBe(1);
    expect(delta('tessera_refreshes_total{result="ok"}')).toBe(1);
    expect(delta('tessera_refreshes_total{result="grace"}')).toBe(1);
    expect(delta('tessera_refreshes_total{result="reuse"}')).toBe(1);
    expect(delta('tessera_refreshes_total{result="invalid"}')).toBe(1);
    expect(delta('tessera_sessions_ended_total{reason="refresh_token_reuse"}')).toBe(1);
  });

  it('records request durations by route template and status, never by raw URL', async () => {
    const { accessToken } = await signIn(gateway.app, 'durations@example.com');
    const sessionId = '00000000-0000-4000-8000-000000000000';
    await gateway.app.inject({
      method: 'DELETE',
      url: `/api/v1/auth/sessions/${sessionId}`,
      headers: { authorization: `Bearer ${accessToken}` },
    });
    const text = await scrape();
    expect(text).toMatch(
      /tessera_http_request_duration_seconds_count\{[^}]*http_route="\/api\/v1\/auth\/sessions\/:id"[^}]*http_response_status_code="404"[^}]*\} 1/,
    );
    expect(text).toMatch(
      /tessera_http_request_duration_seconds_bucket\{[^}]*http_route="\/api\/v1\/auth\/send-otp-email"/,
    );
    expect(text).not.toContain(sessionId);
  });
});
