import { describe, expect, it } from 'vitest';
import { maskAddresses, maskAddressesInError, maskEmail } from './mask.ts';

describe('maskEmail', () => {
  it('keeps the first letter and the domain only', () => {
    expect(maskEmail('alice@example.com')).toBe('a***@example.com');
    expect(maskEmail('a@example.com')).toBe('a***@example.com');
  });

  it('masks by the last @, so a quoted local part does not leak', () => {
    expect(maskEmail('"bob@home"@example.com')).toBe('"***@example.com');
  });

  it('hides anything that is not an address entirely', () => {
    expect(maskEmail('not-an-address')).toBe('***');
    expect(maskEmail('@example.com')).toBe('***');
  });
});

describe('maskAddresses', () => {
  it('masks every address in an SMTP reply and leaves the rest', () => {
    expect(maskAddresses('550 5.1.1 <alice@example.com>: Recipient address rejected')).toBe(
      '550 5.1.1 <a***@example.com>: Recipient address rejected',
    );
    expect(maskAddresses("Can't send mail - all recipients were rejected: bob@example.org, carol@x.io")).toBe(
      "Can't send mail - all recipients were rejected: b***@example.org, c***@x.io",
    );
  });

  it('masks addresses at the end of a sentence, with subdomains, capitals and non-ASCII domains', () => {
    expect(maskAddresses('Unknown user Erin.Smith@Mail.Example.co.uk.')).toBe(
      'Unknown user E***@Mail.Example.co.uk.',
    );
    expect(maskAddresses('to frank@bücher.de and root@localhost')).toBe(
      'to f***@bücher.de and r***@localhost',
    );
    // Addresses the gateway accepts: an IP address or a numeric top-level domain.
    expect(maskAddresses('550 gina@192.168.1.1 and lee@example.123 refused')).toBe(
      '550 g***@192.168.1.1 and l***@example.123 refused',
    );
  });

  it('leaves the package paths of a stack trace alone, pnpm versions and scopes included', () => {
    const stack = [
      'Error: Message failed: 550 <grace@example.com> unknown',
      '    at SMTPConnection._formatError (/app/node_modules/.pnpm/nodemailer@8.0.1/node_modules/nodemailer/lib/smtp-connection/index.js:798:19)',
      '    at file:///app/node_modules/.pnpm/@fastify+otel@0.21.2_@opentelemetry+api@1.10.0/node_modules/@fastify/otel/index.js:12:3',
      '    at run (/app/node_modules/.pnpm/bullmq@6.7.0_bullmq-otel@2.0.1_ioredis@6.0.0_patch_hash=32a9/node_modules/bullmq/dist/esm/classes/worker.js:1:1)',
      '    at load (/app/node_modules/@scope.name/pkg/index.js:1:1)',
    ].join('\n');
    const [message, ...frames] = maskAddresses(stack).split('\n');
    expect(message).toBe('Error: Message failed: 550 <g***@example.com> unknown');
    expect(frames.join('\n')).toBe(stack.split('\n').slice(1).join('\n'));
  });

  it('masks the recipient in any form a reply gives it: local part alone, URL-encoded, a path, an apostrophe', () => {
    const jane = 'jane.doe@example.com';
    const replies = [
      [
        '550 5.1.1 <jane.doe>: Recipient address rejected: User unknown',
        '550 5.1.1 <j***@example.com>: Recipient address rejected: User unknown',
      ],
      [
        "550 5.1.1 <jane.doe@example.com> User doesn't exist: jane.doe (in reply to RCPT TO command)",
        "550 5.1.1 <j***@example.com> User doesn't exist: j***@example.com (in reply to RCPT TO command)",
      ],
      ['550 5.1.1 No such user Jane.Doe.', '550 5.1.1 No such user j***@example.com.'],
      ['550 see /why?rcpt=jane.doe%40example.com', '550 see /why?rcpt=j***@example.com'],
      ['550 see /why?rcpt=%3Cjane.doe%40example.com%3E', '550 see /why?rcpt=%3Cj***@example.com%3E'],
      ['550 see /why?rcpt=jane.doe%2540example.com', '550 see /why?rcpt=j***@example.com'],
      ['550 see /why?rcpt=jane.doe;lang=en', '550 see /why?rcpt=j***@example.com;lang=en'],
      [
        '550 5.2.1 Mailbox jane.doe@example.com/INBOX disabled',
        '550 5.2.1 Mailbox j***@example.com/INBOX disabled',
      ],
      ['550 5.1.1 &lt;jane.doe&gt; unknown', '550 5.1.1 &lt;j***@example.com&gt; unknown'],
    ];
    expect(replies.map(([reply]) => maskAddresses(reply ?? '', jane))).toEqual(
      replies.map(([, masked]) => masked),
    );
    const mary = "mary.o'brien@example.com";
    expect(maskAddresses(`550 5.1.1 <${mary}>: unknown`, mary)).toBe('550 5.1.1 <m***@example.com>: unknown');
    // Encoded as most URL encoders do (encodeURIComponent leaves the apostrophe), and a +tag's base.
    expect(maskAddresses('550 see /why?rcpt=mary.o%27brien%40example.com', mary)).toBe(
      '550 see /why?rcpt=m***@example.com',
    );
    expect(maskAddresses('550 5.1.1 <jane>: no such user', 'jane+news@example.com')).toBe(
      '550 5.1.1 <j***@example.com>: no such user',
    );
    // Whole words only: a short local part inside other words is left alone.
    expect(maskAddresses('550 5.1.1 <jo>: joke of a user', 'jo@example.com')).toBe(
      '550 5.1.1 <j***@example.com>: joke of a user',
    );
  });

  it("keeps a reply's status and enhanced status, which say whether to retry, whatever the recipient", () => {
    expect(maskAddresses('554 5.7.1 <554@example.com>: Relay access denied', '554@example.com')).toBe(
      '554 5.7.1 <5***@example.com>: Relay access denied',
    );
    expect(maskAddresses('554 5.7.1 Relay access denied for 5.7.1', '5.7.1@example.com')).toBe(
      '554 5.7.1 Relay access denied for 5***@example.com',
    );
  });

  it('masks the message, stack and reply of a delivery error, keeping its response code', () => {
    const error = Object.assign(new Error('Message failed: 550 <dave@example.com> unknown'), {
      response: '550 <dave@example.com> unknown',
      responseCode: 550,
    });
    maskAddressesInError(error);
    expect(error.message).toBe('Message failed: 550 <d***@example.com> unknown');
    expect(error.stack).not.toContain('dave@');
    expect(error.response).toBe('550 <d***@example.com> unknown');
    expect(error.responseCode).toBe(550);
  });
});
