export { type Json, type JsonAnswer, jsonClient } from './json-client.ts';
export { type OtlpSink, type ReceivedSpan, startOtlpSink } from './otlp-sink.ts';
export {
  createDatabase,
  DURABLE_REDIS_ARGS,
  freePort,
  type PgBouncer,
  type PrivatePostgres,
  type PrivateRedis,
  type ProcessLimits,
  type ServiceProcess,
  startGatewayProcess,
  startPgBouncer,
  startPrivatePostgres,
  startPrivateRedis,
  startService,
  waitUntil,
} from './processes.ts';
export { type RedisCluster, startRedisCluster } from './redis-cluster.ts';
export { mentionsCode } from './secrets.ts';
export { createTestDatabase, createTestRedis, type TestDatabase, type TestRedis } from './services.ts';
export { mountSmallDisk, type SmallDisk } from './small-disk.ts';
export { type ReceivedMail, type SmtpSink, type SmtpSinkOptions, startSmtpSink } from './smtp-sink.ts';
export { startTcpProxy, type TcpProxy } from './tcp-proxy.ts';
