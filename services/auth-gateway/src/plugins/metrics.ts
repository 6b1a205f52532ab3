import { meter } from '@tessera/telemetry';
import fp from 'fastify-plugin';

// Up to 30 s: a request that waited out a statement timeout (10 s) must not hide in "over 5 s".
const requestDuration = meter.createHistogram('tessera.http.request.duration.seconds', {
  description: 'Time to answer an HTTP request, by route template and status',
  unit: 's',
  advice: { explicitBucketBoundaries: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30] },
});

/** The request-duration histogram of every route (served with the rest on the operations port). */
export default fp(
  async function metricsPlugin(app) {
    app.addHook('onResponse', (request, reply, done) => {
      requestDuration.record(reply.elapsedTime / 1000, {
        // The template (`/api/v1/auth/sessions/:id`), never the raw URL; unknown routes are one series.
        'http.route': request.routeOptions.url ?? 'unknown',
        'http.request.method': request.method,
        'http.response.status_code': reply.statusCode,
      });
      done();
    });
  },
  { name: 'metrics' },
);
