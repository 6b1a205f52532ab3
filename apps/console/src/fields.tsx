import type { ComponentChildren } from 'preact';

interface FieldProps {
  id: string;
  label: ComponentChildren;
  /** A sentence under the label: the rule people should know before typing. */
  hint?: string;
  /** The id of a hint shown once for a group of fields (a fieldset's), read with this field too. */
  groupHint?: string;
  /** Shown next to the field, and marks the field invalid; the field reads it as its description. */
  error?: string | undefined;
  /**
   * For a field that keeps the focus while its errors come and go (the sign-in's): the error is an
   * alert, and a new key shows it as a new one, announced again even when its text is the same.
   * Without it, the form moves the focus to the first field with a problem (`focusFirstProblem`),
   * which reads its error:
   * an alert too would say it twice, and a form with five problems would say five at once.
   */
  errorKey?: number;
  /** Said to screen readers (`aria-required`); the form says in words which fields are required. */
  required?: boolean;
}

/**
 * Moves the focus to the first field of `form` with a problem, once its error is shown, so that a
 * screen reader reads the field with its error. A field that has the focus already (Enter pressed in
 * it) is left and focused again: focusing it alone would say nothing.
 */
export function focusFirstProblem(form: HTMLElement | null): void {
  setTimeout(() => {
    const field = form?.querySelector<HTMLElement>('[aria-invalid="true"]');
    if (field === document.activeElement) field?.blur();
    field?.focus();
  });
}

/** Ids of the hint and the error, for `aria-describedby`, so a screen reader reads them with the field. */
function describedBy({ id, hint, groupHint, error }: FieldProps): string | undefined {
  const ids = [groupHint, hint && `${id}-hint`, error && `${id}-error`].filter(Boolean);
  return ids.length > 0 ? ids.join(' ') : undefined;
}

function FieldError({ id, error, errorKey }: Pick<FieldProps, 'id' | 'error' | 'errorKey'>) {
  return error ? (
    <p id={`${id}-error`} class="alert" role={errorKey === undefined ? undefined : 'alert'}>
      {error}
    </p>
  ) : null;
}

/** The label, the hint above the control and the error below it: the frame of every field but a check box. */
function Field({ id, label, hint, error, errorKey, children }: FieldProps & { children: ComponentChildren }) {
  return (
    <div class="field">
      <label for={id}>{label}</label>
      {hint && (
        <p id={`${id}-hint`} class="hint">
          {hint}
        </p>
      )}
      {children}
      <FieldError key={errorKey} id={id} error={error} errorKey={errorKey} />
    </div>
  );
}

/**
 * What every control says about its field: its name, whether it is required or invalid, and what
 * describes it.
 */
const controlOf = (props: FieldProps) => ({
  id: props.id,
  name: props.id,
  'aria-required': props.required ? ('true' as const) : undefined,
  'aria-invalid': props.error ? ('true' as const) : undefined,
  'aria-describedby': describedBy(props),
});

type InputProps = FieldProps & {
  value: string;
  onInput: (value: string) => void;
  type?: 'text' | 'email';
  autoComplete?: string;
  inputMode?: 'text' | 'numeric' | 'email';
  maxLength?: number;
  spellcheck?: boolean;
  /** What the field keeps of what was typed or pasted (the code's digits, say); shown as kept. */
  normalize?: (value: string) => string;
};

export function TextField(props: InputProps) {
  const { value, onInput, type = 'text' } = props;
  return (
    <Field {...props}>
      <input
        {...controlOf(props)}
        // Preact's types tell input types apart by a literal; both of these are text boxes.
        type={type as 'text'}
        value={value}
        onInput={(event) => {
          const typed = event.currentTarget.value;
          const kept = props.normalize ? props.normalize(typed) : typed;
          // Set here too: when what is kept does not change, no render would put it back.
          if (kept !== typed) event.currentTarget.value = kept;
          onInput(kept);
        }}
        autoComplete={props.autoComplete}
        inputMode={props.inputMode}
        maxLength={props.maxLength}
        spellcheck={props.spellcheck}
      />
    </Field>
  );
}

// No maxLength: the browser would count UTF-16 units, and stop at 250 emoji where the API allows 500.
export function TextAreaField(props: FieldProps & { value: string; onInput: (value: string) => void }) {
  return (
    <Field {...props}>
      <textarea
        {...controlOf(props)}
        value={props.value}
        onInput={(event) => props.onInput(event.currentTarget.value)}
      />
    </Field>
  );
}

export function SelectField(
  props: FieldProps & {
    value: string;
    onChange: (value: string) => void;
    options: readonly { value: string; label: string }[];
  },
) {
  return (
    <Field {...props}>
      <select
        {...controlOf(props)}
        value={props.value}
        onChange={(event) => props.onChange(event.currentTarget.value)}
      >
        {props.options.map((option) => (
          <option key={option.value} value={option.value}>
            {option.label}
          </option>
        ))}
      </select>
    </Field>
  );
}

export function CheckField(props: FieldProps & { checked: boolean; onChange: (checked: boolean) => void }) {
  const { id, label, error, errorKey, checked, onChange } = props;
  return (
    <div>
      <div class="check">
        <input
          {...controlOf(props)}
          type="checkbox"
          checked={checked}
          onChange={(event) => onChange(event.currentTarget.checked)}
        />
        <label for={id}>{label}</label>
      </div>
      <FieldError key={errorKey} id={id} error={error} errorKey={errorKey} />
    </div>
  );
}
