import { parseArgs } from 'node:util';
import type { FastifyInstance } from 'fastify';
import type { OperatorConfig } from './config.ts';
import { mailboxOf, normalizeEmail } from './modules/sign-in/email-address.ts';
import { createOtpStore } from './modules/sign-in/otp.store.ts';
import { OTP_SECRET_WINDOW } from './modules/sign-in/otp-secret-check.ts';
import { runOperatorCommand } from './operator-command.ts';

const USAGE = `usage: limits-cli.ts lift --email <address> [--json]
Reads the gateway's Redis settings (REDIS_URL, REDIS_CLUSTER_NODES, REDIS_KEY_PREFIX), OTP_SECRET and OTP_* limits.
Where gateways of that prefix told that Redis their OTP_SECRETs in the last 5 minutes, it refuses (exit code 1) one
that none of them ran with.
Forgets the address's wrong codes (and the 24-hour lock-out they make), its inbox's codes sent in the hour and
its resend cooldown, so that it may ask for a code and sign in at once. The limits of client IPs stay.`;

/**
 * An operator's lift of one address's sign-in limits (package script `limits:lift`), for a user
 * locked out by someone else's wrong guesses. Exit code 0 when done, 1 when Redis or the
 * configuration fails or its OTP_SECRET is none the gateways told (a line of its own on stderr), 2 on
 * a usage error.
 */
export function runLimitsCli(argv: string[], env: NodeJS.ProcessEnv = process.env): Promise<number> {
  return runOperatorCommand(
    { name: 'limits lift', usage: USAGE, parse, reads: ['otp'], run: lift },
    argv,
    env,
  );
}

async function lift(args: ReturnType<typeof parse>, app: FastifyInstance, config: OperatorConfig<'otp'>) {
  const otp = createOtpStore(app.redis, config.otp);
  // Keys are HMACs under OTP_SECRET: under another than the gateways', the lift would find nothing.
  const { told, ours } = await otp.secretsTold(OTP_SECRET_WINDOW * 1000, false);
  if (told > 0 && !ours) {
    console.error(
      `limits lift: OTP_SECRET is none of those the gateways of REDIS_KEY_PREFIX "${config.redis.keyPrefix}" on this Redis ran with in the last ${OTP_SECRET_WINDOW / 60} minutes, so none of their keys can be found with it: give the command the REDIS_URL (REDIS_CLUSTER_NODES), REDIS_KEY_PREFIX and OTP_SECRET of the gateways meant`,
    );
    return 1;
  }
  const email = normalizeEmail(args.email);
  const lifted = await otp.lift({ email, mailbox: mailboxOf(email) });
  const counted = `${count(lifted.wrongGuesses, 'wrong code')} in the last 24 hours and ${count(lifted.codesSent, 'code')} sent in the last hour`;
  console.log(
    args.json
      ? JSON.stringify({ email, ...lifted })
      : lifted.wrongGuesses + lifted.codesSent > 0
        ? `limits lifted for ${email}: forgot ${counted}; it may ask for a code now (a client IP's own limits stay)`
        : // The keys are HMACs under OTP_SECRET, under REDIS_KEY_PREFIX: another value finds none.
          `nothing to lift for ${email}: ${counted} (if it is refused, check that OTP_SECRET and REDIS_KEY_PREFIX are the gateway's)`,
  );
  return 0;
}

const count = (n: number, what: string) =>
  n === 0 ? `no ${what}s` : n === 1 ? `1 ${what}` : `${n} ${what}s`;

function parse(argv: string[]) {
  const { positionals, values } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: { email: { type: 'string', multiple: true }, json: { type: 'boolean', default: false } },
  });
  if (positionals.join(' ') !== 'lift')
    throw new Error(`unknown command: ${positionals.join(' ') || '(none)'}`);
  const [email, ...more] = values.email ?? [];
  if (email === undefined || email.trim() === '' || more.length > 0)
    throw new Error('give --email once: one address at a time');
  return { email, json: values.json };
}

if (import.meta.main) process.exitCode = await runLimitsCli(process.argv.slice(2));
