import { once } from 'node:events';
import net, { type AddressInfo } from 'node:net';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { bearer, body, post, signIn, startGateway, type TestGateway } from './helpers.ts';

let gateway: TestGateway;
beforeAll(async () => {
  gateway = await startGateway();
  gateway.app.get('/test/explode', async () => {
    throw new Error('secret internal detail: password=hunter2');
  });
});
afterAll(() => gateway.close());

const SEND = '/api/v1/auth/send-otp-email';

function expectErrorEnvelope(json: Record<string, unknown>, status: number, message: string) {
  expect(Object.keys(json).sort()).toEqual(['data', 'errors', 'isSuccess', 'statusCode', 'timestamp']);
  expect(json).toMatchObject({ isSuccess: false, statusCode: status, data: null });
  expect((json.errors as string[])[0]).toBe(message);
  expect(json.timestamp).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
}

describe('every response is the envelope', () => {
  it('answers an unknown route with an enveloped 404', async () => {
    const response = await gateway.app.inject({ method: 'GET', url: '/api/v1/nope?token=abc' });
    expect(response.statusCode).toBe(404);
    expectErrorEnvelope(body(response), 404, 'Resource not found');
    expect(response.headers['tessera-error-code']).toBe('ROUTE_NOT_FOUND');
    expect(response.body).not.toContain('token=abc');
  });

  it('answers a known path asked with another method with an enveloped 405 and Allow', async () => {
    const wrong = await gateway.app.inject({ method: 'GET', url: '/api/v1/auth/send-otp-email' });
    expect(wrong.statusCode).toBe(405);
    expect(wrong.headers.allow).toBe('POST');
    expect(wrong.headers['tessera-error-code']).toBe('METHOD_NOT_ALLOWED');
    expectErrorEnvelope(body(wrong), 405, 'Method not allowed');
    expect(body(wrong).errors[1]).toBe('/api/v1/auth/send-otp-email answers POST, not GET');

    const session = await gateway.app.inject({
      method: 'PUT',
      url: '/api/v1/auth/sessions/9e1c7b4a-3d2f-4a6e-8b1c-5f7d9e0a2b3c',
    });
    expect(session.statusCode).toBe(405);
    expect(session.headers.allow).toBe('DELETE');
  });

  it('answers a 401 with the bearer challenge', async () => {
    const missing = await gateway.app.inject({ url: '/api/v1/auth/sessions' });
    expect(missing.statusCode).toBe(401);
    expect(missing.headers['www-authenticate']).toBe('Bearer');
    expect(missing.headers['tessera-error-code']).toBe('BEARER_MISSING');
    // A token that does not verify, or that is no signed JWT at all (unsigned `alg: none` has no
    // third part): the client holds a token it should drop, not none.
    for (const token of ['a.b.c', 'eyJhbGciOiJub25lIn0.e30.', 'not-a-token'])
      for (const scheme of ['Bearer', 'bearer']) {
        const refused = await gateway.app.inject({
          url: '/api/v1/auth/sessions',
          headers: { authorization: `${scheme} ${token}` },
        });
        expect(refused.statusCode).toBe(401);
        expect(refused.headers['www-authenticate'], token).toBe('Bearer error="invalid_token"');
        expect(body(refused).errors[1]).toBe('Access token is invalid or expired');
        expect(refused.headers['tessera-error-code']).toBe('ACCESS_TOKEN_INVALID');
      }
    // Another scheme, or none: no token was sent.
    for (const authorization of ['Basic dXNlcjpwYXNz', 'Bearer', 'Bearer '])
      expect(
        (await gateway.app.inject({ url: '/api/v1/auth/sessions', headers: { authorization } })).headers[
          'www-authenticate'
        ],
        authorization,
      ).toBe('Bearer');
  });

  it('answers malformed JSON with an enveloped 400', async () => {
    const response = await gateway.app.inject({
      method: 'POST',
      url: SEND,
      headers: { 'content-type': 'application/json' },
      payload: '{"email": "a@b.co"',
    });
    expect(response.statusCode).toBe(400);
    expectErrorEnvelope(body(response), 400, 'Validation failed');
    expect(body(response).errors).toContain('Body is not valid JSON');
  });

  it("answers a body that names an object's prototype with a 400 that says so, rather than drop the key", async () => {
    for (const payload of [
      '{"email":"a@b.co","__proto__":{"isAdmin":true}}',
      '{"email":"a@b.co","constructor":{"prototype":{"isAdmin":true}}}',
    ]) {
      const response = await gateway.app.inject({
        method: 'POST',
        url: SEND,
        headers: { 'content-type': 'application/json' },
        payload,
      });
      expect(response.statusCode, payload).toBe(400);
      // Valid JSON: not INVALID_JSON, whose words a client would show.
      expect(response.headers['tessera-error-code'], payload).toBe('VALIDATION_FAILED');
      expect(body(response).errors, payload).toEqual([
        'Validation failed',
        'body holds a `__proto__` or `constructor.prototype` key, which no field has',
      ]);
    }
    // A key named constructor is only a key.
    expect((await post(gateway.app, SEND, { email: 'a@b.co', constructor: 'x' })).statusCode).toBe(200);
  });

  it('answers bytes that are not UTF-8 with a 400, rather than store U+FFFD in their place', async () => {
    const response = await gateway.app.inject({
      method: 'POST',
      url: SEND,
      headers: { 'content-type': 'application/json' },
      payload: Buffer.concat([Buffer.from('{"email": "a'), Buffer.from([0xff]), Buffer.from('@b.co"}')]),
    });
    expect(response.statusCode).toBe(400);
    expect(body(response).errors).toEqual([
      'Validation failed',
      'Body is not valid JSON',
      'body is not UTF-8',
    ]);
  });

  it('reads JSON in UTF-8 only: another charset is a 415', async () => {
    const inCharset = (charset: string) =>
      gateway.app.inject({
        method: 'POST',
        url: SEND,
        headers: { 'content-type': `application/json; charset=${charset}` },
        payload: Buffer.from('{"email": "caf\xe9@b.co"}', 'latin1'),
      });
    const latin1 = await inCharset('iso-8859-1');
    expect(latin1.statusCode).toBe(415);
    expect(body(latin1).errors).toEqual(['Unsupported media type', 'JSON must be sent in UTF-8']);
    // Declared UTF-8, the same bytes are no UTF-8 at all.
    expect((await inCharset('"UTF-8"')).statusCode).toBe(400);
    // Nothing to read, nothing to refuse: a logout with only a Content-Type header.
    const { accessToken } = await signIn(gateway.app, 'charset@example.com');
    const logout = await gateway.app.inject({
      method: 'POST',
      url: '/api/v1/auth/logout',
      headers: { 'content-type': 'application/json; charset=iso-8859-1', ...bearer(accessToken) },
    });
    expect(logout.statusCode).toBe(200);
  });

  it('reads no compressed body: a Content-Encoding is a 415 that says so', async () => {
    const encoded = (encoding: string, payload: Buffer | string) =>
      gateway.app.inject({
        method: 'POST',
        url: SEND,
        headers: { 'content-type': 'application/json', 'content-encoding': encoding },
        payload,
      });
    const gzipped = await encoded('gzip', gzipSync('{"email":"gzip@b.co"}'));
    expect(gzipped.statusCode).toBe(415);
    expect(gzipped.headers['tessera-error-code']).toBe('UNSUPPORTED_ENCODING');
    expect(body(gzipped).errors).toEqual([
      'Unsupported media type',
      'The body must be sent uncompressed: no Content-Encoding, no Transfer-Encoding but chunked',
    ]);
    // Said compressed and sent plain, it is not served as if the header were not there.
    expect((await encoded('gzip', '{"email":"gzip@b.co"}')).statusCode).toBe(415);
    expect((await encoded('identity', '{"email":"gzip@b.co"}')).statusCode).toBe(200);
  });

  it('answers a non-JSON body with an enveloped 415', async () => {
    const response = await gateway.app.inject({
      method: 'POST',
      url: SEND,
      headers: { 'content-type': 'text/plain' },
      payload: 'email=a@b.co',
    });
    expect(response.statusCode).toBe(415);
    expectErrorEnvelope(body(response), 415, 'Unsupported media type');
  });

  it('takes a POST without a body as none, whatever its Content-Type (axios in Node says a form)', async () => {
    const { accessToken } = await signIn(gateway.app, 'bodyless@example.com');
    const postAs = (url: string, contentType: string, payload?: string) =>
      gateway.app.inject({
        method: 'POST',
        url,
        headers: {
          'content-type': contentType,
          ...(payload === undefined && { 'content-length': '0' }),
          ...bearer(accessToken),
        },
        payload,
      });
    // A body that is there is read as its Content-Type says: a form is refused.
    expect((await postAs('/api/v1/auth/logout', 'application/x-www-form-urlencoded', 'a=b')).statusCode).toBe(
      415,
    );
    expect((await postAs('/api/v1/users/me/deletion', 'application/x-www-form-urlencoded')).statusCode).toBe(
      200,
    );
    // Neither Content-Length nor Transfer-Encoding (curl's POST, fetch's DELETE): no body either.
    const unframed = await gateway.app.inject({
      method: 'DELETE',
      url: '/api/v1/users/me/deletion',
      headers: { 'content-type': 'text/plain', ...bearer(accessToken) },
    });
    expect(unframed.statusCode).toBe(200);
    expect((await postAs('/api/v1/auth/logout', 'text/plain')).statusCode).toBe(200);
  });

  it('answers an oversized body with an enveloped 413', async () => {
    const response = await post(gateway.app, SEND, { email: 'a@b.co', padding: 'x'.repeat(64 * 1024) });
    expect(response.statusCode).toBe(413);
    expectErrorEnvelope(body(response), 413, 'Payload too large');
  });

  it('answers an unexpected exception with a 500 that shows no internals', async () => {
    const response = await gateway.app.inject({ method: 'GET', url: '/test/explode' });
    expect(response.statusCode).toBe(500);
    expectErrorEnvelope(body(response), 500, 'Internal server error');
    expect(response.headers['tessera-error-code']).toBe('INTERNAL');
    expect(response.body).not.toContain('hunter2');
    expect(response.body).not.toContain('explode');
  });

  it('names the failing field of an invalid body', async () => {
    const response = await post(gateway.app, SEND, { email: 'not-an-email' });
    expect(response.statusCode).toBe(400);
    expect(body(response).errors).toEqual(['Validation failed', 'body.email must match format "email"']);
  });

  it('does not coerce body types: a numeric code is a 400', async () => {
    const response = await post(gateway.app, '/api/v1/auth/verify-otp-email', {
      email: 'a@b.co',
      code: 1234,
    });
    expect(response.statusCode).toBe(400);
    expect(body(response).errors[1]).toBe('body.code must be string');
  });

  it('ignores unknown body fields and normalizes the email', async () => {
    const response = await post(gateway.app, SEND, {
      email: '  Alice@Example.COM ',
      extra: { nested: true },
    });
    expect(response.statusCode).toBe(200);
    expect(body(response)).toMatchObject({
      isSuccess: true,
      statusCode: 200,
      errors: [],
      data: { email: 'alice@example.com', expiresIn: 300, resendIn: 0 },
    });
  });

  it('envelopes a URL that cannot be decoded', async () => {
    const response = await gateway.app.inject({ method: 'GET', url: '/api/v1/auth/sessions/%E0%A4%A' });
    expect(response.statusCode).toBe(400);
    expectErrorEnvelope(body(response), 400, 'Validation failed');
  });

  it('envelopes a path segment too long to route as a 414, with its own message', async () => {
    const response = await gateway.app.inject({
      method: 'DELETE',
      url: `/api/v1/auth/sessions/${'a'.repeat(101)}`,
    });
    expect(response.statusCode).toBe(414);
    expectErrorEnvelope(body(response), 414, 'URI too long');
    expect(response.headers['tessera-error-code']).toBe('BAD_REQUEST');
  });

  it('envelopes a request too broken to parse, straight from the socket', async () => {
    await gateway.app.listen({ port: 0, host: '127.0.0.1' });
    const { port } = gateway.app.server.address() as AddressInfo;
    const socket = net.connect(port, '127.0.0.1');
    socket.end('NOT HTTP AT ALL\r\n\r\n');
    const chunks: Buffer[] = [];
    for await (const chunk of socket) chunks.push(chunk as Buffer);
    const [head = '', payload = ''] = Buffer.concat(chunks).toString().split('\r\n\r\n');
    expect(head).toMatch(/^HTTP\/1\.1 400 /);
    expect(head).toContain('application/json');
    expect(head).toContain('tessera-error-code: BAD_REQUEST');
    expect(head).toContain('Cache-Control: no-store');
    expectErrorEnvelope(JSON.parse(payload), 400, 'Validation failed');
    expect(JSON.parse(payload).errors).toEqual([
      'Validation failed',
      'The request is not HTTP/1.1 the gateway can read',
    ]);
  });

  it('echoes a well-formed X-Request-Id and mints one otherwise', async () => {
    const given = await gateway.app.inject({
      method: 'GET',
      url: '/health/live',
      headers: { 'x-request-id': 'abc-123' },
    });
    expect(given.headers['x-request-id']).toBe('abc-123');
    const minted = await gateway.app.inject({
      method: 'GET',
      url: '/health/live',
      headers: { 'x-request-id': 'a b\nc' },
    });
    expect(minted.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
  });
});

// Found by test/fuzz.test.ts: answers Node's HTTP server used to give before the gateway saw them.
describe('every response is the envelope, straight from the socket', () => {
  async function listening(): Promise<number> {
    if (!gateway.app.server.listening) await gateway.app.listen({ port: 0, host: '127.0.0.1' });
    return (gateway.app.server.address() as AddressInfo).port;
  }

  /** Writes a request (without half-closing, which would make Node drop the answer) and reads until the server closes. */
  async function exchange(request: string): Promise<string> {
    const socket = net.connect(await listening(), '127.0.0.1');
    socket.write(request);
    const chunks: Buffer[] = [];
    for await (const chunk of socket) chunks.push(chunk as Buffer);
    return Buffer.concat(chunks).toString();
  }

  function only(response: string) {
    const [head = '', ...rest] = response.split('\r\n\r\n');
    const payload = rest.join('\r\n\r\n');
    expect(response.match(/HTTP\/1\.1 \d{3} /g), 'one response on the connection').toHaveLength(1);
    return { head, json: JSON.parse(payload) as Record<string, unknown> };
  }

  it('answers an HTTP/1.1 request without Host with an enveloped 400, not an empty one', async () => {
    const { head, json } = only(await exchange('GET /health/live HTTP/1.1\r\nConnection: close\r\n\r\n'));
    expect(head).toMatch(/^HTTP\/1\.1 400 /);
    expectErrorEnvelope(json, 400, 'Validation failed');
    expect(json.errors).toEqual(['Validation failed', 'An HTTP/1.1 request needs a Host header']);
  });

  it('ignores an expectation it does not know instead of a bare 417', async () => {
    const { head, json } = only(
      await exchange(
        'GET /health/live HTTP/1.1\r\nHost: x\r\nExpect: something-else\r\nConnection: close\r\n\r\n',
      ),
    );
    expect(head).toMatch(/^HTTP\/1\.1 200 /);
    expect(json).toMatchObject({ isSuccess: true, statusCode: 200, data: { status: 'ok' } });
  });

  it('answers a request with two Host headers with a 400 (RFC 9112 §3.2)', async () => {
    const { head, json } = only(
      await exchange('GET /health/live HTTP/1.1\r\nHost: a\r\nHost: b\r\nConnection: close\r\n\r\n'),
    );
    expect(head).toMatch(/^HTTP\/1\.1 400 /);
    expect(json.errors).toEqual(['Validation failed', 'Send one Host header']);
  });

  it('refuses a body in a transfer coding other than chunked, which Node leaves as sent', async () => {
    const chunk = '{"email":"te@b.co"}';
    const { head, json } = only(
      await exchange(
        `POST ${SEND} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: gzip, chunked\r\n` +
          `Connection: close\r\n\r\n${chunk.length.toString(16)}\r\n${chunk}\r\n0\r\n\r\n`,
      ),
    );
    expect(head).toMatch(/^HTTP\/1\.1 415 /);
    expect(head).toContain('tessera-error-code: UNSUPPORTED_ENCODING');
    expect(json.statusCode).toBe(415);
  });

  it('answers CONNECT with the envelope instead of closing the connection without a word', async () => {
    const { head, json } = only(
      await exchange('CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n'),
    );
    expect(head).toMatch(/^HTTP\/1\.1 400 /);
    expect(json.errors).toEqual(['Validation failed', 'CONNECT is not served here']);
  });

  it('answers a request pipelined before a CONNECT first, and outlives a CONNECT whose client resets', async () => {
    const response = await exchange(
      'GET /health/live HTTP/1.1\r\nHost: x\r\n\r\nCONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n',
    );
    expect(response.match(/HTTP\/1\.1 \d{3}/g)).toEqual(['HTTP/1.1 200', 'HTTP/1.1 400']);
    // Node hands a CONNECT's socket over without its error listener: the answer written into a reset
    // connection would be an uncaught error, the end of the process.
    const port = await listening();
    for (let round = 0; round < 20; round += 1) {
      const socket = net.connect(port, '127.0.0.1');
      await once(socket, 'connect');
      socket.write('CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n');
      socket.resetAndDestroy();
    }
    const { head } = only(
      await exchange('GET /health/live HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n'),
    );
    expect(head).toMatch(/^HTTP\/1\.1 200 /);
  });

  it('answers the requests before unreadable bytes on a connection first, then the bytes with a 400', async () => {
    const response = await exchange(
      'GET /health/live HTTP/1.1\r\nHost: x\r\n\r\nGET /.well-known/jwks.json HTTP/1.1\r\nHost: x\r\n\r\nGARBAGE\r\n\r\n',
    );
    expect(response.match(/HTTP\/1\.1 \d{3}/g)).toEqual(['HTTP/1.1 200', 'HTTP/1.1 200', 'HTTP/1.1 400']);
    expect(response).toContain('"keys":');
  });

  it('refuses a body larger than the limit before the client sends it (Expect: 100-continue), and invites a smaller one', async () => {
    const large = await exchange(
      `POST ${SEND} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2000000\r\nExpect: 100-continue\r\n\r\n`,
    );
    expect(large).not.toContain('100 Continue');
    const { head } = only(large);
    expect(head).toMatch(/^HTTP\/1\.1 413 /);
    const payload = '{"email":"expect@b.co"}';
    const small = await exchange(
      `POST ${SEND} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${payload.length}\r\n` +
        `Expect: 100-continue\r\nConnection: close\r\n\r\n${payload}`,
    );
    expect(small.match(/HTTP\/1\.1 \d{3}/g)).toEqual(['HTTP/1.1 100', 'HTTP/1.1 200']);
  });

  it('sends one response when the parser fails after the gateway already answered', async () => {
    // The URL is refused at once (400), then the parser rejects `Transfer-Encoding: identity`.
    const response = await exchange(
      'GET /api/v1/auth/sessions/%E0%A4%A HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: identity\r\nConnection: close\r\n\r\n',
    );
    const { head, json } = only(response);
    expect(head).toMatch(/^HTTP\/1\.1 400 /);
    expectErrorEnvelope(json, 400, 'Validation failed');
  });

  it.each([
    ['a URL that cannot be decoded', '/api/v1/auth/sessions/%E0%A4%A', 400],
    ['an unknown route', '/api/v1/nope', 404],
    ['a missing bearer token', '/api/v1/auth/logout', 401],
    ['a method the path does not answer', '/api/v1/auth/sessions', 405],
  ])(
    'answers a request once when its body turns out malformed after it was refused for %s',
    async (_, path, status) => {
      // Refused before its body is read; a bad chunk of that body arrives after the answer.
      const socket = net.connect(await listening(), '127.0.0.1');
      socket.write(`POST ${path} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n`);
      const chunks: Buffer[] = [];
      socket.on('data', (chunk: Buffer) => chunks.push(chunk));
      await vi.waitFor(() => expect(Buffer.concat(chunks).toString()).toContain('"isSuccess":false'), {
        timeout: 5000,
      });
      socket.write('zz\r\nnot a chunk\r\n');
      await once(socket, 'close');
      const { head, json } = only(Buffer.concat(chunks).toString());
      expect(head).toMatch(new RegExp(`^HTTP/1\\.1 ${status} `));
      expect(json.statusCode).toBe(status);
    },
  );
});

describe('a 2 MiB body', () => {
  it('gets the 413 envelope every time, with or without Content-Length, never a reset', async () => {
    const server = await startGateway();
    try {
      await server.app.listen({ port: 0, host: '127.0.0.1' });
      const { port } = server.app.server.address() as AddressInfo;
      // A client uploading at its own pace: the refusal comes while it is still writing.
      const upload = async (chunked: boolean) => {
        const socket = net.connect(port, '127.0.0.1');
        let answer = '';
        let failure: Error | undefined;
        socket.on('data', (chunk: Buffer) => {
          answer += chunk;
        });
        socket.on('error', (error) => {
          failure = error;
        });
        const closed = once(socket, 'close');
        const length = chunked ? 'Transfer-Encoding: chunked' : `Content-Length: ${2 * 1024 * 1024}`;
        socket.write(
          `POST /api/v1/auth/send-otp-email HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n${length}\r\n\r\n`,
        );
        const piece = Buffer.alloc(64 * 1024, 'a');
        for (let i = 0; i < 32 && !failure; i++) {
          socket.write(
            chunked ? Buffer.concat([Buffer.from('10000\r\n'), piece, Buffer.from('\r\n')]) : piece,
          );
          await new Promise((resolve) => setTimeout(resolve, 5));
        }
        socket.end(chunked ? '0\r\n\r\n' : '');
        await closed;
        return { answer, failure };
      };
      for (let i = 0; i < 3; i++)
        for (const chunked of [false, true]) {
          const { answer, failure } = await upload(chunked);
          const where = `${chunked ? 'chunked' : 'content-length'} #${i}`;
          expect(failure, where).toBeUndefined();
          expect(answer, where).toMatch(/^HTTP\/1\.1 413 /);
          expect(JSON.parse(answer.slice(answer.indexOf('\r\n\r\n'))), where).toMatchObject({
            statusCode: 413,
            errors: ['Payload too large', 'Request body is too large'],
          });
        }
    } finally {
      await server.close();
    }
  });
});
