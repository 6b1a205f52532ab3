export { type OtlpSink, type ReceivedSpan, startOtlpSink } from './otlp-sink.ts';
export { createTestDatabase, createTestRedis, type TestDatabase, type TestRedis } from './services.ts';
export { type ReceivedMail, type SmtpSink, startSmtpSink } from './smtp-sink.ts';
