# One image per service: `docker build --target gateway .` / `--target mailer`.
# Node 24 runs the TypeScript sources directly (type stripping), so there is no build step.
FROM node:24-slim AS base
RUN npm install --global pnpm@10
WORKDIR /app
COPY package.json pnpm-lock.yaml pnpm-workspace.yaml ./
COPY packages/config/package.json packages/config/
COPY packages/contracts/package.json packages/contracts/
COPY packages/telemetry/package.json packages/telemetry/
COPY packages/testing/package.json packages/testing/
COPY infra/package.json infra/
COPY services/auth-gateway/package.json services/auth-gateway/
COPY services/mailer/package.json services/mailer/
COPY test/package.json test/
RUN pnpm install --frozen-lockfile --prod \
    --filter "@tessera/auth-gateway..." --filter "@tessera/mailer..." --filter "@tessera/infra..."
COPY packages/config packages/config
COPY packages/contracts packages/contracts
COPY packages/telemetry packages/telemetry
COPY infra infra
COPY services services
ENV APP_ENV=production
USER node

FROM base AS gateway
EXPOSE 3000
HEALTHCHECK CMD node -e "fetch('http://127.0.0.1:3000/health/ready').then(r => process.exit(r.ok ? 0 : 1), () => process.exit(1))"
CMD ["node", "--import", "./packages/telemetry/src/register.ts", "services/auth-gateway/src/server.ts"]

FROM base AS mailer
EXPOSE 9464
CMD ["node", "--import", "./packages/telemetry/src/register.ts", "services/mailer/src/main.ts"]
