/**
 * What the side panel shows for one notebook: its asks, their steps and answers.
 */
import { ISignal, Signal } from '@lumino/signaling';

import { addTurn, atEnd, IAskCost } from './cost';
import { IEditReview, reviewOf } from './editstate';
import { errorText, isKnown } from './protocol';
import type {
  AnyMessage,
  IAskEnd,
  IAskReused,
  IAskStart,
  IRequestSent,
  ISentPart,
  IStepEnd,
  IStepStart,
  IUnresolved,
  IUsage,
  IWaitingForUser,
  StepKind,
  StepStatus,
  WaitingKind
} from './protocol';
import type { IRecordedAsk } from './records';

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

/** The asks kept across page loads: the last ones, what was sent only for the last few. */
function kept(asks: readonly IAskView[]): IAskView[] {
  const last = asks.slice(-KEPT_ASKS);
  return last.map((ask, i) => (i < last.length - KEPT_SENT ? { ...ask, sent: undefined } : ask));
}

/**
 * A thinking ask writes now (code or text): its clock goes on from when it began to think
 * (from now after waiting for the user). Say whether the phase changed.
 */
function toWriting(ask: IAskView): boolean {
  const phase = ask.phase;
  if (phase?.what !== 'thinking' && phase?.what !== 'waiting') {
    return false;
  }
  const since = phase.what === 'thinking' ? phase.since : Date.now();
  ask.phase = { what: 'writing', since };
  return true;
}

function newAsk(cellId: string, prompt: string, model: string): IAskView {
  return {
    cellId,
    askId: null,
    prompt,
    model,
    status: 'pending',
    steps: [],
    answer: '',
    error: null
  };
}

/** The most asks a notebook's conversation keeps across page loads. */
export const KEPT_ASKS = 50;

/**
 * The most asks whose "what the model was sent" is kept across page loads: it holds the
 * context of every ask, too much for the browser's storage for all of them.
 */
export const KEPT_SENT = 10;

/** Where a conversation is kept between page loads (the browser's local storage). */
export interface IConversationStore {
  getItem(key: string): string | null;
  setItem(key: string, value: string): void;
}

function isAskView(value: unknown): value is IAskView {
  const ask = value as Partial<IAskView> | null;
  return (
    typeof ask === 'object' &&
    ask !== null &&
    typeof ask.cellId === 'string' &&
    typeof ask.prompt === 'string' &&
    typeof ask.answer === 'string' &&
    Array.isArray(ask.steps)
  );
}

/**
 * The asks of one notebook, in the order they started.
 */
export class Conversation {
  /**
   * A conversation kept under `key` in `store` (when given): what the panel showed comes
   * back after a reload. Asks that were running then are shown as interrupted until the
   * kernel says they still run (it does, to a reloaded page, with ask_state).
   */
  constructor(
    private readonly _store: IConversationStore | null = null,
    private readonly _key: string = ''
  ) {
    this._load();
    this._changed.connect(this._save, this);
  }

  /** Emitted whenever anything in the conversation changes. */
  get changed(): ISignal<this, void> {
    return this._changed;
  }

  get asks(): readonly IAskView[] {
    return this._asks;
  }

  /** Whether an ask is waiting for or running in the kernel. */
  get busy(): boolean {
    return this._asks.some(a => a.status === 'pending' || a.status === 'running');
  }

  /**
   * Follow an ask under way: its steps, the model's text, what it sent, what it does now.
   * Other messages (and types this page does not know) change nothing here.
   */
  follow(msg: AnyMessage): void {
    if (!isKnown(msg)) {
      return;
    }
    switch (msg.type) {
      case 'code_preview':
        return this.writing(msg.ask_id);
      case 'step_start':
        return this.stepStart(msg);
      case 'step_end':
        return this.stepEnd(msg);
      case 'text':
        return this.text(msg.ask_id, msg.delta);
      case 'request_sent':
        return this.requestSent(msg);
      case 'thinking':
        return this.thinking(msg.ask_id);
      case 'waiting_for_user':
        this.proposeEdits(msg);
        return this.waitingForUser(msg.ask_id, msg.question, msg.kind);
      case 'usage':
        return this.update(msg.ask_id, ask => this._addUsage(ask, msg));
      // warning, step_sent_back: the %%ask cell's log shows them (the kernel writes it).
    }
  }

  /** Show a prompt sent from the panel before the kernel starts the ask. */
  addPending(cellId: string, prompt: string, model: string): void {
    this._asks.push(newAsk(cellId, prompt, model));
    this._changed.emit();
  }

  /** Whether the `%%ask` cell `cellId` was sent from the panel and has not started yet. */
  isPending(cellId: string): boolean {
    return this._asks.some(a => a.cellId === cellId && a.status === 'pending');
  }

  /** Fail a pending prompt whose cell finished without starting an ask. */
  settlePending(cellId: string, message: string): void {
    const ask = this._asks.find(a => a.cellId === cellId && a.status === 'pending');
    if (ask !== undefined) {
      ask.status = 'failed';
      ask.error = message;
      this._changed.emit();
    }
  }

  start(msg: IAskStart): void {
    // A resumed ask (the page reloaded) has its entry from before the reload.
    const ask = this._find(msg.ask_id) ?? this._entryFor(msg.cell_id, msg.prompt, msg.model);
    ask.askId = msg.ask_id;
    ask.prompt = msg.prompt;
    ask.model = msg.model;
    ask.status = 'running';
    ask.phase = { what: 'thinking', since: Date.now() };
    this._changed.emit();
  }

  /** The model was called: it thinks until it writes (or a step runs). */
  thinking(askId: string): void {
    const ask = this._find(askId);
    if (ask !== undefined && ask.phase?.what !== 'thinking') {
      ask.phase = { what: 'thinking', since: Date.now() };
      this._changed.emit();
    }
  }

  /** The kernel asks the user a question (on stdin, in the notebook). */
  waitingForUser(askId: string, question: string, kind?: WaitingKind): void {
    const ask = this._find(askId);
    if (ask !== undefined) {
      ask.phase = { what: 'waiting', since: Date.now(), question, kind };
      this._changed.emit();
    }
  }

  /** Edits of the user's cells to review (a waiting_for_user of kind "edits"). */
  proposeEdits(msg: IWaitingForUser): void {
    const review = reviewOf(msg);
    if (review !== null) {
      this.update(msg.ask_id, ask => {
        ask.reviews = [...(ask.reviews ?? []), review];
      });
    }
  }

  /** Change the ask `askId` (edit reviews do, editreview.ts) and tell the views. */
  update(askId: string, change: (ask: IAskView) => void): void {
    const ask = this._find(askId);
    if (ask !== undefined) {
      change(ask);
      this._changed.emit();
    }
  }

  private _addUsage(ask: IAskView, msg: IUsage): void {
    ask.cost = addTurn(ask.cost ?? undefined, msg);
  }

  stepStart(msg: IStepStart): void {
    const ask = this._find(msg.ask_id);
    if (ask === undefined) {
      return;
    }
    ask.phase = { what: 'running', since: Date.now() };
    const step = ask.steps.find(s => s.step === msg.step);
    if (step === undefined) {
      ask.steps.push({
        step: msg.step,
        attempt: msg.attempt,
        status: 'running',
        failedAttempts: 0,
        durationS: null,
        error: null,
        kind: msg.kind,
        package: msg.package
      });
    } else {
      step.attempt = msg.attempt;
      step.status = 'running';
      step.durationS = null;
      step.kind = msg.kind;
      step.package = msg.package;
    }
    this._changed.emit();
  }

  stepEnd(msg: IStepEnd): void {
    const ask = this._find(msg.ask_id);
    const step = ask?.steps.find(s => s.step === msg.step);
    if (ask === undefined || step === undefined) {
      return;
    }
    ask.phase = { what: 'thinking', since: Date.now() };
    step.status = msg.status;
    step.durationS = msg.duration_ms / 1000;
    step.error = msg.error ? `${msg.error.ename}: ${msg.error.evalue}` : null;
    if (msg.status !== 'ok') {
      step.failedAttempts += 1;
    }
    this._changed.emit();
  }

  /** The model writes a step's code now (a preview arrived). */
  writing(askId: string): void {
    const ask = this._find(askId);
    if (ask !== undefined && toWriting(ask)) {
      this._changed.emit();
    }
  }

  /** The model's streamed text: it writes now. */
  text(askId: string, delta: string): void {
    const ask = this._find(askId);
    if (ask !== undefined) {
      ask.answer += delta;
      toWriting(ask);
      this._changed.emit();
    }
  }

  end(msg: IAskEnd): void {
    const ask = this._find(msg.ask_id);
    if (ask === undefined) {
      return;
    }
    ask.status = msg.status;
    ask.phase = null;
    if (msg.answer) {
      ask.answer = msg.answer;
    }
    ask.error = errorText(msg.error);
    ask.unresolved = msg.unresolved ?? null;
    if (msg.usage) {
      ask.cost = atEnd(ask.cost ?? undefined, msg.usage);
    }
    for (const review of ask.reviews ?? []) {
      if (review.state === 'open') {
        review.state = 'closed'; // the ask ended before the page answered: nothing applies
      }
    }
    if (typeof msg.record?.created === 'string') {
      ask.created = msg.record.created;
    }
    for (const step of ask.steps) {
      if (step.status === 'running') {
        step.status = 'interrupted';
      }
    }
    this._changed.emit();
  }

  /** Keep what the ask's last model call sent (each call sends it: the last one stays). */
  requestSent(msg: IRequestSent): void {
    const ask = this._find(msg.ask_id);
    if (ask !== undefined) {
      ask.sent = msg.parts;
      this._changed.emit();
    }
  }

  /**
   * Show an ask whose earlier answer a re-run reused (no model call, no new cells): its own
   * entry when the conversation has one (each Run All reuses it again), else a new one.
   */
  reused(msg: IAskReused): void {
    const ask = this._find(msg.ask_id) ?? this._entryFor(msg.cell_id, msg.prompt, msg.model);
    ask.askId = msg.ask_id;
    ask.status = 'done';
    ask.error = null;
    ask.answer = msg.answer;
    ask.reused = true;
    // The kernel reuses only a record it signed: its answer is no longer just read here.
    ask.fromNotebook = false;
    this._changed.emit();
  }

  /**
   * Add the asks a notebook's records tell of that this conversation lacks (a browser that
   * did not see them: another one, or its storage cleared), each placed by when it ended.
   */
  addRecorded(asks: readonly IRecordedAsk[]): void {
    const known = new Set(this._asks.map(a => a.askId));
    const added = asks.filter(a => !known.has(a.askId));
    for (const recorded of added) {
      const ask: IAskView = {
        ...newAsk(recorded.cellId, recorded.prompt, recorded.model),
        askId: recorded.askId,
        status: recorded.status,
        steps: recorded.steps,
        answer: recorded.answer,
        error: recorded.error || null,
        unresolved: recorded.unresolved,
        created: recorded.created,
        cost: recorded.cost ?? null,
        fromNotebook: true
      };
      const later = this._asks.findIndex(a => !!a.created && !!ask.created && a.created > ask.created);
      this._asks.splice(later < 0 ? this._asks.length : later, 0, ask);
    }
    if (added.length > 0) {
      this._changed.emit();
    }
  }

  /** End one ask that stopped without an `ask_end`. */
  abandon(askId: string, reason: string): void {
    const ask = this._find(askId);
    if (ask !== undefined && ask.status === 'running') {
      ask.status = 'failed';
      ask.error = reason;
      this._changed.emit();
    }
  }

  /** End every running ask: the kernel restarted or died under it. */
  kernelLost(reason: string): void {
    let touched = false;
    for (const ask of this._asks) {
      if (ask.status === 'running' || ask.status === 'pending') {
        ask.status = 'interrupted';
        ask.error = reason;
        touched = true;
      }
    }
    if (touched) {
      this._changed.emit();
    }
  }

  /** The panel's pending entry for this `%%ask` cell, else a new one. */
  private _entryFor(cellId: string, prompt: string, model: string): IAskView {
    let ask = this._asks.find(a => a.cellId === cellId && a.status === 'pending');
    if (ask === undefined) {
      ask = newAsk(cellId, prompt, model);
      this._asks.push(ask);
    }
    return ask;
  }

  private _find(askId: string): IAskView | undefined {
    return this._asks.find(a => a.askId === askId);
  }

  private _load(): void {
    if (this._store === null || !this._key) {
      return;
    }
    let stored: unknown = null;
    try {
      stored = JSON.parse(this._store.getItem(this._key) ?? 'null');
    } catch {
      return; // not ours, or cut short: start afresh
    }
    if (!Array.isArray(stored)) {
      return;
    }
    for (const ask of stored.filter(isAskView)) {
      if (ask.status === 'running' || ask.status === 'pending') {
        ask.status = 'interrupted';
        ask.error = 'The page was reloaded while this ask ran.';
      }
      this._asks.push(ask);
    }
  }

  private _save(): void {
    if (this._store === null || !this._key) {
      return;
    }
    try {
      this._store.setItem(this._key, JSON.stringify(kept(this._asks)));
    } catch {
      // Storage full or refused: the panel goes on without keeping it.
    }
  }

  private readonly _asks: IAskView[] = [];
  private readonly _changed = new Signal<this, void>(this);
}

/**
 * One conversation per open notebook document (shared by all its views).
 */
export class Conversations {
  constructor(private readonly _store: IConversationStore | null = null) {}

  /** Return the conversation of a document, creating (or loading) it on first use. */
  get(document: { readonly path: string }): Conversation {
    let conversation = this._map.get(document);
    if (conversation === undefined) {
      conversation = new Conversation(this._store, `jupyter-ci:conversation:${document.path}`);
      this._map.set(document, conversation);
    }
    return conversation;
  }

  private readonly _map = new WeakMap<object, Conversation>();
}
