/**
 * What the side panel shows of one ask: its steps, answer, phase, cost and reviews.
 */
import type { IAskCost } from './cost';
import type { ISentPart, IUnresolved, StepKind, StepStatus, WaitingKind } from './protocol';
import type { IEditReview } from './question';

export type AskViewStatus = 'pending' | 'running' | 'done' | 'failed' | 'interrupted';

export interface IStepView {
  step: number;
  attempt: number;
  status: 'running' | StepStatus;
  /** Attempts that failed before the current one. */
  failedAttempts: number;
  /** In seconds (as stored by earlier versions too). */
  durationS: number | null;
  error: string | null;
  /** What the attempt runs: the model's code (when absent too), an install, a retry after one. */
  kind?: StepKind;
  /** The package an install is about. */
  package?: string;
}

/** What a running ask does now: what the panel's clock shows. */
export interface IPhase {
  what: 'thinking' | 'running' | 'writing' | 'waiting';
  /** Since when (ms since the epoch). */
  since: number;
  /** While waiting: the question the kernel asks the user. */
  question?: string;
  /** While waiting: what the question is about (a step or plan waits for approval). */
  kind?: WaitingKind;
}

export interface IAskView {
  /** The `%%ask` cell; known before the kernel answers when sent from the panel. */
  cellId: string;
  askId: string | null;
  prompt: string;
  model: string;
  status: AskViewStatus;
  steps: IStepView[];
  /** Streamed answer text, replaced by the final answer at the end. */
  answer: string;
  error: string | null;
  /** The answer of an earlier run, reused without asking the model. */
  reused?: boolean;
  /**
   * Answered while a step's last attempt still failed; `message` says so in the kernel's
   * words ('' in an entry kept or read from a notebook by an older version).
   */
  unresolved?: IUnresolved | null;
  /** What the ask's last model call sent, in parts. */
  sent?: ISentPart[];
  /** While it runs: what it does now, and since when, for a clock. */
  phase?: IPhase | null;
  /** When its record was written (ISO time), to place asks read from the notebook. */
  created?: string;
  /**
   * Read from the notebook's ask record (records.ts), which this page cannot verify: shown
   * as plain text only, until the kernel reuses it (it checks the record's signature).
   */
  fromNotebook?: boolean;
  /** Its tokens and price so far (cost.ts adds them up). */
  cost?: IAskCost | null;
  /** The edits of the user's cells it proposed, batch by batch, and what was decided. */
  reviews?: IEditReview[];
}
