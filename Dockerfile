# One image per service: `docker build --target gateway .` / `--target mailer`.
# The build stage type-checks the TypeScript sources and bundles each service into one file (`pnpm bundle`).
FROM node:24-slim AS workspace
# The version package.json's `packageManager` names.
RUN npm install --global pnpm@10.34.9
WORKDIR /app
COPY package.json pnpm-lock.yaml pnpm-workspace.yaml ./
# The dependency patches (pnpm-workspace.yaml, patchedDependencies): pnpm install applies them.
COPY patches patches/
COPY apps/console/package.json apps/console/
COPY bench/package.json bench/
COPY packages/client/package.json packages/client/
COPY packages/config/package.json packages/config/
COPY packages/contracts/package.json packages/contracts/
COPY packages/redis/package.json packages/redis/
COPY packages/telemetry/package.json packages/telemetry/
COPY infra/package.json infra/
COPY services/auth-gateway/package.json services/auth-gateway/
COPY services/mailer/package.json services/mailer/
COPY test/package.json test/
COPY testing/package.json testing/

# Every dependency and the whole workspace, so an image is only made from sources that type-check;
# then the account console's static files and the services' bundles.
FROM workspace AS build
RUN pnpm install --frozen-lockfile
COPY . .
RUN pnpm typecheck && pnpm console:build && pnpm bundle

# Production dependencies of the gateway, the mailer and the migrations (what the bundles leave out
# and the telemetry the services start with); no test or dev packages.
FROM workspace AS runtime
RUN pnpm install --frozen-lockfile --prod \
    --filter-prod "@tessera/auth-gateway..." --filter-prod "@tessera/mailer..." --filter-prod "@tessera/infra..."
COPY packages/config packages/config
COPY packages/contracts packages/contracts
COPY packages/redis packages/redis
COPY packages/telemetry packages/telemetry
COPY infra infra
COPY services services
# The console the gateway serves at /account/ (and, as BuildKit builds only the stages a target
# uses, what keeps the typecheck in).
COPY --from=build /app/apps/console/dist apps/console/dist
COPY --from=build /app/services/auth-gateway/dist services/auth-gateway/dist
COPY --from=build /app/services/mailer/dist services/mailer/dist
# NODE_COMPILE_CACHE: the modules compiled once, here, the telemetry's stripped of their types, so the
# services start without loading Node's TypeScript stripper (~17 MB per process). MALLOC_ARENA_MAX: two
# malloc arenas rather than one per thread, a few MB less. NODE_OPTIONS: V8's heap sized for a small
# service (README, Operations: Memory); a deployment may set its own.
ENV APP_ENV=production NODE_COMPILE_CACHE=/app/.cache/node MALLOC_ARENA_MAX=2 \
    NODE_OPTIONS="--max-semi-space-size=4 --max-old-space-size=128"
RUN mkdir -p /app/.cache/node && chown node /app/.cache/node
# The cache is per user: filled by the user the services run as. Started without their configuration,
# each service loads all its modules (with and without a trace exporter) and stops.
USER node
RUN for endpoint in "" http://127.0.0.1:4318; do \
      for main in services/auth-gateway/dist/server.js services/mailer/dist/main.js; do \
        OTEL_EXPORTER_OTLP_ENDPOINT=$endpoint node --import ./packages/telemetry/src/register.ts $main 2>/dev/null; \
      done; \
    done; \
    test -n "$(ls /app/.cache/node)"

# The liveness probe by bash's /dev/tcp: ~3 ms of CPU a check, where a `node -e fetch(…)` took ~80 ms
# and 60 MB every 30 s (0.16 s of CPU a minute, where the idle service itself spends 0.33). Bash itself
# (the exec form: no shell left behind when Docker stops a check), failed unless answered in 5 s, on the
# port's digits alone (a CRLF env file's `9465\r` is the port 9465, as the service reads it).
FROM runtime AS gateway
EXPOSE 3000 9465
HEALTHCHECK --timeout=10s CMD ["bash", "-c", "port=${OPS_PORT:-9465}; exec 3<>/dev/tcp/127.0.0.1/${port//[^0-9]/} && printf 'GET /health/live HTTP/1.0\\r\\n\\r\\n' >&3 && read -r -t 5 _ status _ <&3 && [ \"$status\" = 200 ] || exit 1"]
CMD ["node", "--import", "./packages/telemetry/src/register.ts", "services/auth-gateway/dist/server.js"]

FROM runtime AS mailer
EXPOSE 9464
HEALTHCHECK --timeout=10s CMD ["bash", "-c", "port=${MAILER_METRICS_PORT:-9464}; exec 3<>/dev/tcp/127.0.0.1/${port//[^0-9]/} && printf 'GET /health/live HTTP/1.0\\r\\n\\r\\n' >&3 && read -r -t 5 _ status _ <&3 && [ \"$status\" = 200 ] || exit 1"]
CMD ["node", "--import", "./packages/telemetry/src/register.ts", "services/mailer/dist/main.js"]
