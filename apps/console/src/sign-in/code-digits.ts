/**
 * What the Code field keeps of what was typed or pasted: its digits, four at most. A code copied
 * from an email often comes with spaces or a line break around it (" 1234 "), or split ("12 34").
 */
export const codeDigits = (text: string): string => text.replace(/\D/g, '').slice(0, 4);
