import type { ComponentChildren } from 'preact';

interface FieldProps {
  id: string;
  label: ComponentChildren;
  /** A sentence under the label: the rule people should know before typing. */
  hint?: string;
  /** Shown next to the field, announced at once (`role="alert"`), and marks the field invalid. */
  error?: string | undefined;
}

/** Ids of the hint and the error, for `aria-describedby`, so a screen reader reads them with the field. */
function describedBy({ id, hint, error }: FieldProps): string | undefined {
  const ids = [hint && `${id}-hint`, error && `${id}-error`].filter(Boolean);
  return ids.length > 0 ? ids.join(' ') : undefined;
}

function FieldError({ id, error }: Pick<FieldProps, 'id' | 'error'>) {
  return error ? (
    <p id={`${id}-error`} class="alert" role="alert">
      {error}
    </p>
  ) : null;
}

type InputProps = FieldProps & {
  value: string;
  onInput: (value: string) => void;
  type?: 'text' | 'email';
  autoComplete?: string;
  inputMode?: 'text' | 'numeric' | 'email';
  maxLength?: number;
  spellcheck?: boolean;
};

export function TextField(props: InputProps) {
  const { id, label, hint, error, value, onInput, type = 'text', ...rest } = props;
  return (
    <div class="field">
      <label for={id}>{label}</label>
      {hint && (
        <p id={`${id}-hint`} class="hint">
          {hint}
        </p>
      )}
      <input
        id={id}
        name={id}
        // Preact's types tell input types apart by a literal; both of these are text boxes.
        type={type as 'text'}
        value={value}
        onInput={(event) => onInput(event.currentTarget.value)}
        aria-invalid={error ? 'true' : undefined}
        aria-describedby={describedBy(props)}
        autoComplete={rest.autoComplete}
        inputMode={rest.inputMode}
        maxLength={rest.maxLength}
        spellcheck={rest.spellcheck}
      />
      <FieldError id={id} error={error} />
    </div>
  );
}

export function TextAreaField(
  props: FieldProps & { value: string; onInput: (value: string) => void; maxLength?: number },
) {
  const { id, label, error, value, onInput, maxLength } = props;
  return (
    <div class="field">
      <label for={id}>{label}</label>
      {props.hint && (
        <p id={`${id}-hint`} class="hint">
          {props.hint}
        </p>
      )}
      <textarea
        id={id}
        name={id}
        value={value}
        maxLength={maxLength}
        onInput={(event) => onInput(event.currentTarget.value)}
        aria-invalid={error ? 'true' : undefined}
        aria-describedby={describedBy(props)}
      />
      <FieldError id={id} error={error} />
    </div>
  );
}

export function SelectField(
  props: FieldProps & {
    value: string;
    onChange: (value: string) => void;
    options: readonly { value: string; label: string }[];
  },
) {
  const { id, label, error, value, onChange, options } = props;
  return (
    <div class="field">
      <label for={id}>{label}</label>
      {props.hint && (
        <p id={`${id}-hint`} class="hint">
          {props.hint}
        </p>
      )}
      <select
        id={id}
        name={id}
        value={value}
        onChange={(event) => onChange(event.currentTarget.value)}
        aria-invalid={error ? 'true' : undefined}
        aria-describedby={describedBy(props)}
      >
        {options.map((option) => (
          <option key={option.value} value={option.value}>
            {option.label}
          </option>
        ))}
      </select>
      <FieldError id={id} error={error} />
    </div>
  );
}

export function CheckField(props: FieldProps & { checked: boolean; onChange: (checked: boolean) => void }) {
  const { id, label, error, checked, onChange } = props;
  return (
    <div>
      <div class="check">
        <input
          id={id}
          name={id}
          type="checkbox"
          checked={checked}
          onChange={(event) => onChange(event.currentTarget.checked)}
          aria-invalid={error ? 'true' : undefined}
          aria-describedby={describedBy(props)}
        />
        <label for={id}>{label}</label>
      </div>
      <FieldError id={id} error={error} />
    </div>
  );
}
