import { errorResponses } from '@tessera/contracts';
import { userAnswer } from '../users/user.ts';

const bearer = [{ bearerAuth: [] }];
const tags = ['users'];

export const requestDeletionSchema = {
  operationId: 'requestAccountDeletion',
  summary: "Schedule the deletion of the caller's account",
  description:
    'The account is erased `ACCOUNT_DELETION_GRACE` seconds from now (`accountDeletionScheduledFor`); ' +
    'an email tells the date. Until then everything works as before and the deletion can be ' +
    'cancelled. Then every session ends and the personal data is erased. 409: already scheduled. 429: ' +
    'cancelled less than `ACCOUNT_DELETION_REQUEST_COOLDOWN` seconds ago (each change emails the account).',
  tags,
  security: bearer,
  response: {
    200: {
      ...userAnswer({
        accountDeletionStatus: 'scheduled',
        accountDeletionRequestedAt: '2026-11-23T10:00:00.000Z',
        accountDeletionScheduledFor: '2026-12-23T10:00:00.000Z',
      }),
      description: 'Scheduled: the User, with the date of the deletion',
    },
    ...errorResponses(
      401,
      [409, 'a deletion is already scheduled'],
      [
        429,
        'the deletion was cancelled less than ACCOUNT_DELETION_REQUEST_COOLDOWN ago, or a rate limit is reached',
      ],
      503,
    ),
  },
};

export const cancelDeletionSchema = {
  operationId: 'cancelAccountDeletion',
  summary: "Cancel the scheduled deletion of the caller's account",
  description:
    'The account stays; an email confirms it. 409: no deletion is scheduled, or it is already due.',
  tags,
  security: bearer,
  response: {
    200: {
      ...userAnswer({
        accountDeletionStatus: 'cancelled',
        accountDeletionRequestedAt: '2026-11-23T10:00:00.000Z',
        accountDeletionScheduledFor: '2026-12-23T10:00:00.000Z',
        accountDeletionCancelledAt: '2026-11-24T08:30:00.000Z',
      }),
      description: 'Cancelled: the User, whose account stays',
    },
    ...errorResponses(401, [409, 'no deletion is scheduled, or it is already due'], 503),
  },
};
