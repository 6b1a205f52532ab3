import { useCallback, useState } from 'preact/hooks';

/** The text of a live region (a status, an alert), and a key that is new every time it is set. */
export interface Message {
  text: string;
  key: number;
}

/**
 * A message that is announced every time it is set, the same text again included ("Saved", then
 * "Saved" again). Preact leaves a text that did not change alone, and a live region whose content
 * does not change says nothing; so whatever shows the message takes `key` as its key, and each
 * message is a new element, which screen readers read out.
 */
export function useMessage(): [Message, (text?: string) => void] {
  const [message, setMessage] = useState<Message>({ text: '', key: 0 });
  const say = useCallback((text = '') => setMessage(({ key }) => ({ text, key: key + 1 })), []);
  return [message, say];
}

/** The message inside a live region that stays on the page (one added with its text may not be read). */
export function MessageText({ message }: { message: Message }) {
  return <span key={message.key}>{message.text}</span>;
}
