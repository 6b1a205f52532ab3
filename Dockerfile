# One image per service: `docker build --target gateway .` / `--target mailer`.
# Node 24 runs the TypeScript sources directly (type stripping); the build stage only type-checks them.
FROM node:24-slim AS workspace
RUN npm install --global pnpm@10
WORKDIR /app
COPY package.json pnpm-lock.yaml pnpm-workspace.yaml ./
COPY packages/config/package.json packages/config/
COPY packages/contracts/package.json packages/contracts/
COPY packages/redis/package.json packages/redis/
COPY packages/telemetry/package.json packages/telemetry/
COPY packages/testing/package.json packages/testing/
COPY infra/package.json infra/
COPY services/auth-gateway/package.json services/auth-gateway/
COPY services/mailer/package.json services/mailer/
COPY test/package.json test/

# Every dependency and the whole workspace, so an image is only made from sources that type-check.
FROM workspace AS build
RUN pnpm install --frozen-lockfile
COPY . .
RUN pnpm typecheck && touch /typechecked

# Production dependencies of the gateway, the mailer and the migrations; no test or dev packages.
FROM workspace AS runtime
RUN pnpm install --frozen-lockfile --prod \
    --filter-prod "@tessera/auth-gateway..." --filter-prod "@tessera/mailer..." --filter-prod "@tessera/infra..."
COPY packages/config packages/config
COPY packages/contracts packages/contracts
COPY packages/redis packages/redis
COPY packages/telemetry packages/telemetry
COPY infra infra
COPY services services
# BuildKit builds only the stages a target uses; depending on this marker keeps the typecheck in.
COPY --from=build /typechecked /typechecked
ENV APP_ENV=production
USER node

FROM runtime AS gateway
EXPOSE 3000 9465
HEALTHCHECK CMD node -e "fetch('http://127.0.0.1:3000/health/ready').then(r => process.exit(r.ok ? 0 : 1), () => process.exit(1))"
CMD ["node", "--import", "./packages/telemetry/src/register.ts", "services/auth-gateway/src/server.ts"]

FROM runtime AS mailer
EXPOSE 9464
CMD ["node", "--import", "./packages/telemetry/src/register.ts", "services/mailer/src/main.ts"]
