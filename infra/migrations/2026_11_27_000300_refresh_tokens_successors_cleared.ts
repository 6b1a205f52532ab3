import { type Kysely, sql } from 'kysely';

// Frozen in time: a migration never imports application code.
// A rotated token kept the sealed successor it needs for the grace window (at most 300 s) until the
// retention sweep deleted it, weeks later; sealed under a key from the rotated token alone, a dump of
// the table and any old token of a session opened its chain of successors up to the current token.
// The gateway now also seals them with a key of its own; the seals made before go once past use:
// 10 minutes, twice the longest grace (300 s), as a gateway's clock stamped rotated_at. Each rotated
// row with a seal is rewritten once, in one transaction (in place where its page has room).
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`update refresh_tokens set successor_sealed = null
    where successor_sealed is not null and rotated_at < now() - interval '10 minutes'`.execute(db);
}

export async function down(): Promise<void> {
  // What was cleared is gone, and nothing needs it.
}
