import { Ajv, type ErrorObject, type Options, type ValidateFunction } from 'ajv';
import addFormats from 'ajv-formats';
import type { FastifySchemaCompiler } from 'fastify';

// Bodies are JSON and are never coerced ("1234" is not 1234); query strings and path
// parameters are text on the wire and are parsed into the declared types.
const shared: Options = { allErrors: false, useDefaults: true, removeAdditional: false, strict: false };
const bodyAjv = addFormats.default(new Ajv({ ...shared, coerceTypes: false }));
const textAjv = addFormats.default(new Ajv({ ...shared, coerceTypes: true }));

type TextSchema = { properties?: Record<string, { type?: unknown }> };

/**
 * A text part's validator that takes an integer only as decimal digits: Ajv's coercion would read
 * `page=1e1` as 10, `0x2` as 2 and ` 2` as 2.
 */
function textValidator(schema: TextSchema): ValidateFunction {
  const validate = textAjv.compile(schema);
  const integers = Object.entries(schema.properties ?? {})
    .filter(([, property]) => property.type === 'integer')
    .map(([name]) => name);
  if (integers.length === 0) return validate;
  const checked = ((data: Record<string, unknown> | undefined) => {
    const name = integers.find(
      (key) => typeof data?.[key] === 'string' && !/^-?\d+$/.test(data[key] as string),
    );
    if (name !== undefined) {
      const notDigits: ErrorObject = {
        keyword: 'type',
        instancePath: `/${name}`,
        schemaPath: `#/properties/${name}/type`,
        params: { type: 'integer' },
        message: 'must be integer',
      };
      checked.errors = [notDigits];
      return false;
    }
    const valid = validate(data);
    checked.errors = validate.errors;
    return valid;
  }) as ValidateFunction;
  return checked;
}

export const validatorCompiler: FastifySchemaCompiler<unknown> = ({ schema, httpPart }) =>
  httpPart === 'body' ? bodyAjv.compile(schema as object) : textValidator(schema as TextSchema);
