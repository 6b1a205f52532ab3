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
