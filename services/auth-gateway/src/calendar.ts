/**
 * Whether the parts of a written date and time name a real one: JavaScript's Date moves 30 February
 * to 2 March and 24:00 to the next day instead of refusing them.
 */
export function isCalendarTime(year: number, month: number, day: number, hour = 0, minute = 0, second = 0) {
  const daysInMonth = new Date(Date.UTC(year, month, 0)).getUTCDate();
  return (
    month >= 1 && month <= 12 && day >= 1 && day <= daysInMonth && hour <= 23 && minute <= 59 && second <= 59
  );
}

/** The last time a JavaScript Date holds (+275760-09-13), and its negative the first. */
export const LAST_TIME = 8.64e15;
