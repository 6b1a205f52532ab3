import type { TSchema } from 'typebox';

/** What the OpenAPI document calls a schema, and says it is. */
export interface SchemaName {
  name: string;
  description?: string;
}

// A symbol key: invisible to Ajv, fast-json-stringify and JSON.stringify, so a name never changes how
// a schema validates or serializes; object spread copies it, so `{ ...Schema, description }` keeps it.
const NAME = Symbol('tessera.schemaName');

/**
 * Names `schema` in the OpenAPI document: it becomes `components.schemas[name]` and every place that
 * uses it a `$ref` to it. Marks the schema itself (and returns it), so name a schema where it is made.
 */
export function named<T extends TSchema>(name: string, schema: T, description?: string): T {
  const value: SchemaName = description === undefined ? { name } : { name, description };
  Object.defineProperty(schema, NAME, { value, enumerable: true });
  return schema;
}

/** The name `named` gave a schema (or a copy of it made by spreading), if any. */
export function schemaName(schema: object): SchemaName | undefined {
  return (schema as { [NAME]?: SchemaName })[NAME];
}
