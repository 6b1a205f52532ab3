import { type Kysely, sql } from 'kysely';

// Frozen in time: a migration never imports application code.
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('users')
    .addColumn('id', 'uuid', (c) => c.primaryKey().defaultTo(sql`gen_random_uuid()`))
    .addColumn('email', 'text', (c) => c.notNull().unique())
    .addColumn('name', 'text')
    .addColumn('surname', 'text')
    .addColumn('username', 'text', (c) => c.unique())
    .addColumn('country_code', 'text')
    .addColumn('phone_number', 'text')
    .addColumn('signup_source', 'text')
    .addColumn('signup_campaign', 'text')
    .addColumn('profile_photo', 'text')
    .addColumn('availability_status', 'text')
    .addColumn('birth_date', 'timestamptz')
    .addColumn('gender', 'text')
    .addColumn('interests', sql`text[]`, (c) => c.notNull().defaultTo(sql`'{}'`))
    .addColumn('expertise', 'text')
    .addColumn('bio', 'text')
    .addColumn('instagram', 'text')
    .addColumn('x', 'text')
    .addColumn('tiktok', 'text')
    .addColumn('snapchat', 'text')
    .addColumn('facebook', 'text')
    .addColumn('privacy_policy_accepted', 'boolean', (c) => c.notNull().defaultTo(false))
    .addColumn('privacy_policy_version', 'text')
    .addColumn('terms_of_use_accepted', 'boolean', (c) => c.notNull().defaultTo(false))
    .addColumn('terms_of_use_version', 'text')
    .addColumn('consent_form_accepted', 'boolean', (c) => c.notNull().defaultTo(false))
    .addColumn('consent_form_version', 'text')
    .addColumn('is_registration_complete', 'boolean', (c) => c.notNull().defaultTo(false))
    .addColumn('roles', sql`text[]`, (c) => c.notNull().defaultTo(sql`'{user}'`))
    .addColumn('followers_count', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('following_count', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('minute_price_in_live_stream', 'numeric(14, 2)', (c) => c.notNull().defaultTo(0))
    .addColumn('credit_balance', 'numeric(14, 2)', (c) => c.notNull().defaultTo(0))
    .addColumn('last_login', 'timestamptz')
    .addColumn('timezone', 'text')
    .addColumn('last_username_change_date', 'timestamptz')
    .addColumn('account_deletion_status', 'text')
    .addColumn('account_deletion_requested_at', 'timestamptz')
    .addColumn('account_deletion_scheduled_for', 'timestamptz')
    .addColumn('account_deletion_cancelled_at', 'timestamptz')
    .addColumn('account_deletion_finalized_at', 'timestamptz')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('users').execute();
}
