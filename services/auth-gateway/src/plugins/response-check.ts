import { failure } from '@tessera/contracts';
import { Ajv } from 'ajv';
import addFormats from 'ajv-formats';
import fp from 'fastify-plugin';

const ajv = addFormats.default(new Ajv({ allErrors: true, strict: false }));

/**
 * Test mode only: every response is checked against the schema its route documents for that status
 * (the OpenAPI document is made of the same schemas), so the document cannot drift from the service.
 * A response that does not match is turned into a 500 naming the route, status and mismatch, so the
 * test that caused it fails right there.
 */
export default fp(
  async function responseCheck(app) {
    const validators = new Map<string, ReturnType<Ajv['compile']>>();
    app.addHook('onRoute', (route) => {
      const responses = (route.schema?.response ?? {}) as Record<string, object>;
      for (const method of [route.method].flat())
        for (const [status, schema] of Object.entries(responses))
          validators.set(`${method} ${route.url} ${status}`, ajv.compile(schema));
    });
    app.addHook('onSend', async (request, reply, payload) => {
      const url = request.routeOptions.url;
      if (
        !url ||
        typeof payload !== 'string' ||
        !reply.getHeader('content-type')?.toString().includes('json')
      )
        return payload;
      const route = `${request.method} ${url}`;
      // Routes that document no response at all (the console's own files) are not part of the API.
      if (![...validators.keys()].some((key) => key.startsWith(`${route} `))) return payload;
      const validate = validators.get(`${route} ${reply.statusCode}`);
      const problem = !validate
        ? `status ${reply.statusCode} is not documented`
        : !validate(JSON.parse(payload))
          ? `does not match its schema: ${ajv.errorsText(validate.errors)}`
          : undefined;
      if (!problem) return payload;
      reply.code(500);
      return JSON.stringify(failure(500, ['Internal server error', `${route} → ${problem}`], new Date()));
    });
  },
  { name: 'response-check' },
);
