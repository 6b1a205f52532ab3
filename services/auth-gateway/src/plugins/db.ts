import fp from 'fastify-plugin';
import { type Kysely, sql } from 'kysely';
import { createDatabase, type Database } from '../database.ts';

declare module 'fastify' {
  interface FastifyInstance {
    db: Kysely<Database>;
  }
}

/** Postgres through Kysely; checked at start so a wrong DATABASE_URL fails loudly, closed on shutdown. */
export default fp(
  async function dbPlugin(app) {
    const db = createDatabase(app.config.DATABASE_URL, (err) =>
      app.log.warn({ err }, 'idle Postgres client lost'),
    );
    app.decorate('db', db);
    app.addHook('onClose', () => db.destroy());
    await sql`select 1`.execute(db);
  },
  { name: 'db', dependencies: ['config'] },
);
