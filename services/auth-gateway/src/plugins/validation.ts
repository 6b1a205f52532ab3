import { Ajv, type Options } from 'ajv';
import addFormats from 'ajv-formats';
import type { FastifySchemaCompiler } from 'fastify';

// Bodies are JSON and are never coerced ("1234" is not 1234); query strings and path
// parameters are text on the wire and are parsed into the declared types.
const shared: Options = { allErrors: false, useDefaults: true, removeAdditional: false, strict: false };
const bodyAjv = addFormats.default(new Ajv({ ...shared, coerceTypes: false }));
const textAjv = addFormats.default(new Ajv({ ...shared, coerceTypes: true }));

export const validatorCompiler: FastifySchemaCompiler<unknown> = ({ schema, httpPart }) =>
  (httpPart === 'body' ? bodyAjv : textAjv).compile(schema as object);
