/**
 * Types of the kernel ↔ JupyterLab protocol (docs/protocol.md, version 2).
 *
 * The kernel's comm messages are the JSON form of its typed ask events, each with the
 * envelope `ask_id` and `protocol`. Their fields come from protocol.generated.ts, which
 * scripts/gen_wire.py writes from the wire classes (`jupyter_ci/wire/events.py`): a field is
 * added there, not here. What a notebook's cells record (the ask record, a generated cell's
 * record) is cells.ts's.
 */
import type {
  IWireAskClosed,
  IWireAskEnd,
  IWireAskFailure,
  IWireAskOpened,
  IWireAskRecord,
  IWireAskReused,
  IWireClearOutput,
  IWireCodePreview,
  IWireEditOutcome,
  IWireNotice,
  IWireOutput,
  IWirePart,
  IWireProposedEdit,
  IWireRequestSent,
  IWireSetOutputs,
  IWireStepEnd,
  IWireStepError,
  IWireStepSentBack,
  IWireStepStart,
  IWireText,
  IWireThinking,
  IWireUnresolvedStep,
  IWireUsage,
  IWireUsageTotals,
  IWireWaitingForUser
} from './protocol.generated';

/** Protocol version announced in every execute_request. */
export const PROTOCOL_VERSION = 2;

/** Comm target the kernel opens one comm on per ask. */
export const COMM_TARGET = 'jupyter_ci';

/** Key of the frontend announcement in execute_request metadata. */
export const FRONTEND_KEY = 'jupyter_ci_frontend';

/** Cell metadata key of ask records and generated-cell records. */
export const METADATA_KEY = 'jupyter_ci';

export type StepStatus = IWireStepEnd['status'];
export type AskStatus = IWireAskEnd['status'];
/** What a step runs: the model's code, an install of a missing package, or a retry after it. */
export type StepKind = IWireStepStart['kind'];

/** The envelope every message carries. */
interface IEnvelope {
  ask_id: string;
  /** The protocol version the kernel speaks (2); not checked. */
  protocol?: number;
}

/** The comm's open data: the ask's start, and the cell that shows it. */
export interface IAskStart extends IEnvelope, IWireAskOpened {}

export interface IStepStart extends IEnvelope, IWireStepStart {}

/** The code of a step the model is still writing (throttled; step_start has it whole). */
export interface ICodePreview extends IEnvelope, IWireCodePreview {}

export interface IOutputMessage extends IEnvelope, IWireOutput {}

export interface IClearOutput extends IEnvelope, IWireClearOutput {}

export interface ISetOutputs extends IEnvelope, IWireSetOutputs {}

export type IStepError = IWireStepError;

/** A step's end; `kind` and `code` are optional for kernels before they were sent. */
export interface IStepEnd
  extends IEnvelope,
    Omit<IWireStepEnd, 'kind' | 'code'> {
  kind?: StepKind;
  code?: string;
}

/** The model's streamed text (batched a few times a second). */
export interface IText extends IEnvelope, IWireText {}

/** One part of what a model call sent. */
export type ISentPart = IWirePart;

/** At every model call: what it sent, in parts (the panel keeps the last one). */
export interface IRequestSent extends IEnvelope, IWireRequestSent {}

/** The model was called and nothing has come back yet. */
export interface IThinking extends IEnvelope, IWireThinking {}

/** What the kernel asks the user: an install, a step to run, a plan, edits of their cells. */
export type WaitingKind = NonNullable<IWireWaitingForUser['kind']>;

/** A new source for one of the user's own cells that the model proposes (`edit_cell`). */
export type IProposedEdit = IWireProposedEdit;

/**
 * The kernel asks the user a question on stdin; its prompt is exactly `question`. The page
 * answers edits itself (editreview.ts), with the JSON of docs/protocol.md.
 */
// The envelope's ask_id (always set on the comm) is the one the wire class carries for REST.
export interface IWaitingForUser
  extends IEnvelope,
    Omit<IWireWaitingForUser, 'ask_id'> {}

/** After each model turn: its tokens, the ask's so far, and their price where known. */
export interface IUsage extends IEnvelope, IWireUsage {}

/** An ask's tokens and price, in its end. */
export type IAskUsage = IWireUsageTotals;

/** What became of an edit an ask proposed. */
export type IEditOutcome = IWireEditOutcome;

/** Something the user should know (a retiring model, a restart notice). */
export interface IWarning extends IEnvelope, IWireNotice {}

/** The model is sent back to make step `step` self-contained. */
export interface IStepSentBack extends IEnvelope, IWireStepSentBack {}

/** Why an ask ended without an answer. */
export type IAskError = IWireAskFailure;

/** A step whose last attempt still failed when the model answered. */
export type IUnresolved = IWireUnresolvedStep;

/**
 * The ask's end: its outcome, and what the comm adds (the record to keep, the pin).
 * `usage` and `edits` are optional for kernels before issue 23 and protocol's "edits".
 */
export interface IAskEnd
  extends IEnvelope,
    Omit<IWireAskClosed, 'usage' | 'edits' | 'record'> {
  record: IWireAskRecord | null;
  usage?: IAskUsage | null;
  edits?: IEditOutcome[] | null;
}

/** Sent (on a comm opened and closed at once) when a re-run reuses its answer. */
export interface IAskReused extends IEnvelope, IWireAskReused {}

/**
 * Sent (on a comm opened and closed at once) after each step starts and ends, and before the
 * ask ends: where the ask stands, for a page that missed its start (reloaded, or a second tab).
 */
export interface IAskState extends IEnvelope {
  type: 'ask_state';
  cell_id: string | null;
  /** The notebook's path as the page that started the ask named it (null if unknown). */
  notebook: string | null;
  /** The ask's own comm, which carries the rest of the ask while `live`. */
  comm_id: string;
  live: boolean;
  /** The `%%ask` cell's progress log so far (the kernel shows it in that cell's output). */
  log: string[];
  /** ask_start, then the steps so far (each step's outputs as they stand), then ask_end when over. */
  messages: AnyMessage[];
}

/** Every message type this page knows. */
export type KernelMessage =
  | IAskStart
  | IStepStart
  | ICodePreview
  | IOutputMessage
  | IClearOutput
  | ISetOutputs
  | IStepEnd
  | IText
  | IRequestSent
  | IThinking
  | IWaitingForUser
  | IUsage
  | IWarning
  | IStepSentBack
  | IAskEnd
  | IAskReused
  | IAskState;

/** The messages about an ask under way: its steps, its cells' outputs, the model's progress. */
export type ProgressMessage = Exclude<
  KernelMessage,
  IAskStart | IAskReused | IAskState | IAskEnd
>;

/** A message of a type this page does not know (a newer kernel's event): ignored. */
export interface IUnknownEvent extends IEnvelope {
  type: string;
  [field: string]: unknown;
}

/** What parseMessage gives: a known message, or one to ignore (tell them with isKnown). */
export type AnyMessage = KernelMessage | IUnknownEvent;

const KNOWN: { readonly [type in KernelMessage['type']]: true } = {
  ask_start: true,
  step_start: true,
  code_preview: true,
  output: true,
  clear_output: true,
  set_outputs: true,
  step_end: true,
  text: true,
  request_sent: true,
  thinking: true,
  waiting_for_user: true,
  usage: true,
  warning: true,
  step_sent_back: true,
  ask_end: true,
  ask_reused: true,
  ask_state: true
};

/** The message types this page knows. */
export const KNOWN_TYPES: readonly string[] = Object.keys(KNOWN);

/** Tell a message of a known type (the handlers switch on those and ignore the rest). */
export function isKnown(message: AnyMessage): message is KernelMessage {
  return Object.prototype.hasOwnProperty.call(KNOWN, message.type);
}

/**
 * Return the message if `data` looks like a protocol message (a string `type` and a string
 * `ask_id`), else null. Any type is taken: one this page does not know is ignored by its
 * handlers, so a kernel that adds an event needs no change here.
 *
 * Only `type` and `ask_id` are checked: the kernel is trusted to send the
 * fields of each type (it is the user's own kernel).
 */
export function parseMessage(data: unknown): AnyMessage | null {
  if (typeof data !== 'object' || data === null || Array.isArray(data)) {
    return null;
  }
  const record = data as { type?: unknown; ask_id?: unknown };
  if (typeof record.type !== 'string' || typeof record.ask_id !== 'string') {
    return null;
  }
  return data as AnyMessage;
}

/** The text an ask's failure shows: its message, and what to do on the next line. */
export function errorText(error: IAskError | null | undefined): string | null {
  if (error === null || error === undefined) {
    return null;
  }
  return error.hint ? `${error.message}\n${error.hint}` : error.message;
}
