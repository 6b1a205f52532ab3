export * from './email-job.ts';
export * from './envelope.ts';
export * from './errors.ts';
export * from './named-schema.ts';
export * from './pagination.ts';
export * from './sealed-code.ts';
