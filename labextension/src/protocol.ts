/**
 * Types of the kernel ↔ JupyterLab protocol (docs/protocol.md, version 1).
 */
import type * as nbformat from '@jupyterlab/nbformat';

/** Protocol version announced in every execute_request. */
export const PROTOCOL_VERSION = 1;

/** Comm target the kernel opens one comm on per ask. */
export const COMM_TARGET = 'jupyter_ci';

/** Key of the frontend announcement in execute_request metadata. */
export const FRONTEND_KEY = 'jupyter_ci_frontend';

/** Cell metadata key of ask records and generated-cell records. */
export const METADATA_KEY = 'jupyter_ci';

export type StepStatus = 'ok' | 'error' | 'timeout' | 'interrupted' | 'died';
export type AskStatus = 'done' | 'failed' | 'interrupted';

export interface IAskStart {
  type: 'ask_start';
  ask_id: string;
  cell_id: string;
  prompt: string;
  model: string;
  replace_ask_id: string | null;
  /** The `%%ask` cell's own execution count (its reply reports the last step's). */
  execution_count: number | null;
}

export interface IStepStart {
  type: 'step_start';
  ask_id: string;
  step: number;
  attempt: number;
  code: string;
}

/** The code of a step the model is still writing (throttled; step_start has it whole). */
export interface ICodePreview {
  type: 'code_preview';
  ask_id: string;
  /** The step it will be: the step that failed last (a fix), else the next one. */
  step: number;
  attempt: number;
  code: string;
}

export interface IOutputMessage {
  type: 'output';
  ask_id: string;
  step: number;
  output: nbformat.IOutput;
}

export interface IClearOutput {
  type: 'clear_output';
  ask_id: string;
  step: number;
  wait: boolean;
}

export interface ISetOutputs {
  type: 'set_outputs';
  ask_id: string;
  step: number;
  outputs: nbformat.IOutput[];
}

export interface IStepError {
  ename: string;
  evalue: string;
}

export interface IStepEnd {
  type: 'step_end';
  ask_id: string;
  step: number;
  attempt: number;
  status: StepStatus;
  execution_count: number | null;
  duration_s: number;
  error: IStepError | null;
}

export interface IAnswerDelta {
  type: 'answer_delta';
  ask_id: string;
  text: string;
}

/** One part of what the ask's last model call sent (`%%ask --show-context`). */
export interface IContextPart {
  name: string;
  /** Estimated: characters / 4. */
  tokens: number;
  /** The exact text sent, after redaction. */
  text: string;
}

/** With `--show-context`, just before ask_end: what the last model call sent, in parts. */
export interface IContext {
  type: 'context';
  ask_id: string;
  parts: IContextPart[];
}

/** A step whose last attempt still failed when the model answered. */
export interface IUnresolved {
  step: number;
  error: string;
}

export interface IAskEnd {
  type: 'ask_end';
  ask_id: string;
  status: AskStatus;
  answer: string;
  error: string | null;
  record: Record<string, unknown> | null;
  /** With status "done": the answer came while a step still failed. */
  unresolved?: IUnresolved | null;
  /** With status "done": what to write as `--pin` into the `%%ask` line. */
  pin?: string;
}

/** Sent (on a comm opened and closed at once) when a re-run reuses its answer. */
export interface IAskReused {
  type: 'ask_reused';
  ask_id: string;
  cell_id: string;
  prompt: string;
  model: string;
  answer: string;
  steps: number;
  /** What to write as `--pin` into the `%%ask` line. */
  pin?: string;
}

/**
 * Sent (on a comm opened and closed at once) after each step starts and ends, and before the
 * ask ends: where the ask stands, for a page that missed its start (reloaded, or a second tab).
 */
export interface IAskState {
  type: 'ask_state';
  ask_id: string;
  cell_id: string | null;
  /** The notebook's path as the page that started the ask named it (null if unknown). */
  notebook: string | null;
  /** The ask's own comm, which carries the rest of the ask while `live`. */
  comm_id: string;
  live: boolean;
  /** The `%%ask` cell's progress log so far (the kernel shows it in that cell's output). */
  log: string[];
  /** ask_start, then the steps so far (each step's outputs as they stand), then ask_end when over. */
  messages: KernelMessage[];
}

export type KernelMessage =
  | IAskStart
  | IStepStart
  | IOutputMessage
  | IClearOutput
  | ISetOutputs
  | IStepEnd
  | IAnswerDelta
  | IContext
  | IAskEnd
  | IAskReused
  | IAskState
  | ICodePreview;

const TYPES = new Set<string>([
  'ask_start',
  'step_start',
  'output',
  'clear_output',
  'set_outputs',
  'step_end',
  'answer_delta',
  'context',
  'ask_end',
  'ask_reused',
  'ask_state',
  'code_preview'
]);

/**
 * Return the message if `data` looks like a protocol message, else null.
 *
 * Only `type` and `ask_id` are checked: the kernel is trusted to send the
 * fields of each type (it is the user's own kernel).
 */
export function parseMessage(data: unknown): KernelMessage | null {
  if (typeof data !== 'object' || data === null) {
    return null;
  }
  const record = data as { type?: unknown; ask_id?: unknown };
  if (typeof record.type !== 'string' || !TYPES.has(record.type)) {
    return null;
  }
  if (typeof record.ask_id !== 'string') {
    return null;
  }
  return data as KernelMessage;
}

/** One entry of a generated cell's `metadata.jupyter_ci.attempts`. */
export interface IAttempt {
  attempt: number;
  status: StepStatus;
  ename: string | null;
  evalue: string | null;
  duration_s: number;
  code: string;
}

/**
 * An ask cell above an ask, sent with it (`jupyter_ci_frontend.asks_above`): Run All sends
 * every request before the asks above place their steps, so the kernel adds the steps it
 * ran for them since to the stale `above`.
 */
export interface IAskAbove {
  cell_id: string;
  /** The ask its record names now; null before it was answered. */
  ask_id: string | null;
  /** Where its generated cells are in `above`. */
  cells: number[];
}

/** `metadata.jupyter_ci` of a generated cell. */
export interface IGeneratedRecord {
  ask_id: string;
  step: number;
  model: string;
  attempts: IAttempt[];
  interrupted?: boolean;
}

/** Return the generated-cell record in a cell's metadata value, if it is one. */
export function asGeneratedRecord(value: unknown): IGeneratedRecord | null {
  if (typeof value !== 'object' || value === null) {
    return null;
  }
  const record = value as Partial<IGeneratedRecord>;
  if (typeof record.ask_id !== 'string' || typeof record.step !== 'number') {
    return null;
  }
  return {
    ask_id: record.ask_id,
    step: record.step,
    model: typeof record.model === 'string' ? record.model : '',
    attempts: Array.isArray(record.attempts) ? record.attempts : [],
    interrupted: record.interrupted === true ? true : undefined
  };
}

/** Return the ask id in a cell's `metadata.jupyter_ci` value, if any. */
export function askIdOf(value: unknown): string | null {
  if (typeof value !== 'object' || value === null) {
    return null;
  }
  const askId = (value as { ask_id?: unknown }).ask_id;
  return typeof askId === 'string' ? askId : null;
}
