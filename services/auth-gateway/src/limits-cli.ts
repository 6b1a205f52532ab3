import { isIP } from 'node:net';
import { parseArgs } from 'node:util';
import { DEADLINE_MARGIN_MS } from '@tessera/contracts';
import type { RedisClient } from '@tessera/redis';
import { fullFormats } from 'ajv-formats/dist/formats.js';
import type { FastifyInstance } from 'fastify';
import type { OperatorConfig } from './config.ts';
import { type CodeEmailStanding, newestCodeEmail } from './modules/email/email.queue.ts';
import type { Standing } from './modules/limits/sliding-window.ts';
import { mailboxOf, normalizeEmail, undeliverable } from './modules/sign-in/email-address.ts';
import { createOtpStore, type OtpStore } from './modules/sign-in/otp.store.ts';
import { OTP_SECRET_WINDOW } from './modules/sign-in/otp-secret-check.ts';
import { runOperatorCommand } from './operator-command.ts';
import { addressOf } from './plugins/client-address.ts';
import { requestsStanding } from './plugins/rate-limit.ts';

const USAGE = `usage: limits-cli.ts lift --email <address> [--json]
       limits-cli.ts show (--email <address> | --ip <client IP>) [--json]
Reads the gateway's Redis settings (REDIS_URL, REDIS_CLUSTER_NODES, REDIS_KEY_PREFIX), OTP_SECRET and OTP_* limits;
show also BULLMQ_PREFIX and RATE_LIMIT_*. Where gateways of that prefix told that Redis their OTP_SECRETs in the last
5 minutes, it refuses (exit code 1) one that none of them ran with.
lift: forgets the address's wrong codes (and the 24-hour lock-out they make), its inbox's codes sent in the hour and
its resend cooldown, so that it may ask for a code and sign in at once. The limits of client IPs stay.
show: changes nothing; prints the address's code (its wrong guesses, its time left), those three limits as they
stand, and where its newest code email is (accepted by the SMTP server, or its job's state and last error); or a
client IP's own limits: the codes sent at its request and its wrong codes in the hour, and its requests in the
general limit's window.`;

const OPTIONS = {
  email: { type: 'string', multiple: true },
  ip: { type: 'string', multiple: true },
  json: { type: 'boolean', default: false },
} as const;

/**
 * An operator's look at one address's sign-in limits, or their lift (package scripts `limits:show`
 * and `limits:lift`), for a user who gets no code or is locked out by someone else's wrong guesses.
 * Exit code 0 when done, 1 when Redis or the configuration fails or its OTP_SECRET is none the
 * gateways told (a line of its own on stderr), 2 on a usage error.
 */
export function runLimitsCli(argv: string[], env: NodeJS.ProcessEnv = process.env): Promise<number> {
  return verbOf(argv) === 'show'
    ? runOperatorCommand(
        {
          name: 'limits show',
          usage: USAGE,
          parse: parseShow,
          reads: ['otp', 'queue', 'rateLimit'],
          run: show,
        },
        argv,
        env,
      )
    : runOperatorCommand(
        { name: 'limits lift', usage: USAGE, parse: parseLift, reads: ['otp'], run: lift },
        argv,
        env,
      );
}

async function lift(
  args: { email: string; json: boolean },
  app: FastifyInstance,
  config: OperatorConfig<'otp'>,
) {
  const otp = createOtpStore(app.redis, config.otp);
  if ((await gatewaysTold(otp, 'limits lift', config)) === undefined) return 1;
  const { email } = args;
  const lifted = await otp.lift(recipientOf(email));
  const counted = `${count(lifted.wrongCodes, 'wrong code')} in the last 24 hours and ${count(lifted.codesSent, 'code')} sent in the last hour`;
  console.log(
    args.json
      ? JSON.stringify({ email, ...lifted })
      : lifted.wrongCodes + lifted.codesSent > 0
        ? `limits lifted for ${email}: forgot ${counted}; it may ask for a code now (a client IP's own limits stay)`
        : // The keys are HMACs under OTP_SECRET, under REDIS_KEY_PREFIX: another value finds none.
          `nothing to lift for ${email}: ${counted} (if it is refused, check that OTP_SECRET and REDIS_KEY_PREFIX are the gateway's)`,
  );
  return 0;
}

async function show(
  args: ShowArgs,
  app: FastifyInstance,
  config: OperatorConfig<'otp' | 'queue' | 'rateLimit'>,
) {
  const otp = createOtpStore(app.redis, config.otp);
  const told = await gatewaysTold(otp, 'limits show', config);
  if (told === undefined) return 1;
  // Settings that find nothing would read as "nothing holds this address": say so.
  if (told === 0)
    console.error(
      `limits show: no gateway of REDIS_KEY_PREFIX "${config.redis.keyPrefix}" told this Redis its OTP_SECRET in the last ${OTP_SECRET_WINDOW / 60} minutes: if one runs, give the command its REDIS_URL (REDIS_CLUSTER_NODES), REDIS_KEY_PREFIX and OTP_SECRET`,
    );
  if ('ip' in args) return showIp(args, otp, app.redis, config.rateLimit);
  const { email } = args;
  const { mailQueue, mailQueueRedis } = app;
  const [standing, queued, codeEmail] = await Promise.all([
    otp.standing(recipientOf(email)),
    // Written by the services: the queue's meta at their start, its events with each job, and a
    // running mailer's stalled-jobs check every 30 s.
    mailQueueRedis.exists(
      mailQueue.toKey('meta'),
      mailQueue.toKey('events'),
      mailQueue.toKey('stalled-check'),
    ),
    newestCodeEmail(mailQueue, mailQueueRedis, config.mail.queuePrefix, otp.seriesOf(email)),
  ]);
  const noQueue = `no mail queue under BULLMQ_PREFIX "${config.mail.queuePrefix}" on this Redis`;
  if (queued === 0)
    console.error(
      `limits show: ${noQueue}: give the command the gateways' BULLMQ_PREFIX (or, if this Redis lost its data since they started and no mailer runs, the next code queued makes it)`,
    );
  const { code, cooldown, email: inbox, failures: wrongCodes } = standing;
  if (args.json) {
    console.log(JSON.stringify({ email, code, cooldown, inbox, wrongCodes, codeEmail }));
    return 0;
  }
  // The record of the newest email lasts as long as its code may be retried, and a margin.
  const recorded = duration(config.otp.ttl + DEADLINE_MARGIN_MS / 1000);
  console.log(
    [
      `sign-in limits of ${email}, as they stand (a client IP's own are not shown):`,
      `- code: ${
        code === null
          ? 'none held (used, expired, or not asked for)'
          : `${code.wrongGuesses >= code.maxAttempts ? 'locked by' : 'held, with'} ${code.wrongGuesses} of ${code.maxAttempts} wrong guesses, expires in ${duration(code.expiresIn)}`
      }`,
      `- resend cooldown: ${cooldown.retryAfter > 0 ? `${duration(cooldown.retryAfter)} left` : 'none'}`,
      `- codes sent to its inbox in the last hour: ${window(inbox, 'no code is sent')}`,
      `- wrong codes in the last 24 hours: ${window(wrongCodes, 'every send and sign-in is refused')}`,
      `- newest code email: ${
        codeEmail !== null
          ? describe(codeEmail)
          : queued === 0
            ? `unknown: ${noQueue}`
            : `none queued in the last ${recorded}`
      }`,
    ].join('\n'),
  );
  return 0;
}

async function showIp(
  { ip, json }: { ip: string; json: boolean },
  otp: OtpStore,
  redis: RedisClient,
  general: OperatorConfig<'rateLimit'>['rateLimit'],
) {
  const [{ countedAs, sends, wrongCodes }, requests] = await Promise.all([
    otp.ipStanding(ip),
    requestsStanding(redis, ip, general.max),
  ]);
  // IPv6 clients count per /64.
  const counted = isIP(countedAs) === 6 ? `${countedAs}/64` : countedAs;
  console.log(
    json
      ? JSON.stringify({ ip, countedAs: counted, sends, wrongCodes, requests })
      : [
          `limits of the client IP ${ip}, counted as ${counted}, as they stand:`,
          `- codes sent at its request in the last hour: ${window(sends, 'no code is sent at its request')}`,
          `- wrong codes in the last hour: ${window(wrongCodes, 'every sign-in from it is refused')}`,
          `- requests in its window of ${duration(general.window)} (the general limit): ${window(requests, 'every request from it is refused')}`,
        ].join('\n'),
  );
  return 0;
}

/**
 * How many OTP_SECRETs the gateways of this prefix told within the window; undefined, said on stderr,
 * when some did and none was this one: the keys are HMACs under it, so the command would find none.
 */
async function gatewaysTold(otp: OtpStore, name: string, config: OperatorConfig) {
  const { told, ours } = await otp.secretsTold(OTP_SECRET_WINDOW * 1000, false);
  if (told === 0 || ours) return told;
  console.error(
    `${name}: OTP_SECRET is none of those the gateways of REDIS_KEY_PREFIX "${config.redis.keyPrefix}" on this Redis ran with in the last ${OTP_SECRET_WINDOW / 60} minutes, so none of their keys can be found with it: give the command the REDIS_URL (REDIS_CLUSTER_NODES), REDIS_KEY_PREFIX and OTP_SECRET of the gateways meant`,
  );
  return undefined;
}

const recipientOf = (email: string) => ({ email, mailbox: mailboxOf(email) });

const window = ({ held, limit, retryAfter }: Standing, full: string) =>
  `${held} of ${limit}${retryAfter > 0 ? `: ${full} for ${duration(retryAfter)}` : ''}`;

function describe(codeEmail: CodeEmailStanding) {
  const job = `(job ${codeEmail.jobId})`;
  if (codeEmail.state === 'accepted') return `accepted by the SMTP server at ${codeEmail.acceptedAt} ${job}`;
  const { state, queuedAt, attemptsMade, lastError } = codeEmail;
  const last = lastError === null ? '' : `, the last: ${lastError}`;
  switch (state) {
    case 'waiting':
      return `waiting for a mailer since ${queuedAt} ${job}`;
    case 'active':
      return `being sent, attempt ${attemptsMade + 1} ${job}`;
    case 'delayed':
      return `waiting for its retry after ${count(attemptsMade, 'failed attempt')}${last} ${job}`;
    case 'failed':
      return `failed for good after ${count(attemptsMade, 'attempt')}${last} ${job}`;
    case 'gone':
      return `no longer in the queue, and no delivery of it recorded ${job}`;
  }
}

/** `42 s`, `4 min 5 s`, `1 min`, `23 h 59 min`. */
function duration(seconds: number) {
  if (seconds < 60) return `${seconds} s`;
  const [big, rest, small] =
    seconds < 3600
      ? [`${Math.floor(seconds / 60)} min`, seconds % 60, 's']
      : [`${Math.floor(seconds / 3600)} h`, Math.floor((seconds % 3600) / 60), 'min'];
  return rest === 0 ? big : `${big} ${rest} ${small}`;
}

const count = (n: number, what: string) =>
  n === 0 ? `no ${what}s` : n === 1 ? `1 ${what}` : `${n} ${what}s`;

/** The verb, wherever it stands among the options; undefined when they cannot be read (parse says why). */
function verbOf(argv: string[]) {
  try {
    return parseArgs({ args: argv, allowPositionals: true, options: OPTIONS }).positionals[0];
  } catch {
    return undefined;
  }
}

// As the send route checks an address (ajv-formats' `email`, 254 characters, then `undeliverable`):
// nothing of another is in Redis, and a report of it would read as "nothing holds this user".
const EMAIL = fullFormats.email as RegExp;

type ShowArgs = { email: string; json: boolean } | { ip: string; json: boolean };

function read(verb: 'lift' | 'show', argv: string[]) {
  const { positionals, values } = parseArgs({ args: argv, allowPositionals: true, options: OPTIONS });
  if (positionals.join(' ') !== verb)
    throw new Error(`unknown command: ${positionals.join(' ') || '(none)'}`);
  return values;
}

/** The one address of `--email`, normalized, refused as the send route refuses it. */
function emailOf(given: string[] | undefined) {
  const [raw, ...more] = given ?? [];
  if (raw === undefined || raw.trim() === '' || more.length > 0)
    throw new Error('give --email once: one address at a time');
  const email = normalizeEmail(raw);
  // In the gateway's order: what no code could reach (its preValidation), then the format.
  const refused =
    undeliverable(email) ??
    (email.length > 254
      ? 'has more than 254 characters'
      : EMAIL.test(email)
        ? undefined
        : 'is no email address');
  if (refused !== undefined)
    throw new Error(`--email ${JSON.stringify(raw)} ${refused}, as the gateway would answer`);
  return email;
}

function parseLift(argv: string[]) {
  const values = read('lift', argv);
  if (values.ip !== undefined) throw new Error("lift takes --email only: a client IP's limits stay");
  return { email: emailOf(values.email), json: values.json };
}

function parseShow(argv: string[]): ShowArgs {
  const values = read('show', argv);
  if (values.ip === undefined) return { email: emailOf(values.email), json: values.json };
  const [given, ...more] = values.ip.map((entry) => entry.trim());
  if (given === undefined || more.length > 0 || values.email !== undefined)
    throw new Error('give --email or --ip once: one address at a time');
  // As a proxy's log may write it (`203.0.113.7:51234`, `[2001:db8::1]:443`), or a zoned peer.
  const ip = isIP(given) ? given : addressOf(given);
  if (ip === undefined) throw new Error(`--ip ${JSON.stringify(given)} is no IP address`);
  return { ip, json: values.json };
}

if (import.meta.main) process.exitCode = await runLimitsCli(process.argv.slice(2));
