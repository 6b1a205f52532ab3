const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Whether `value` is a UUID, as every `_id` of Tessera is (so Postgres can be asked about it). */
export const isUuid = (value: unknown): value is string => typeof value === 'string' && UUID.test(value);
