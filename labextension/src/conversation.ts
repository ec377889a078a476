/**
 * What the side panel shows for one notebook: its asks, their steps and answers.
 */
import { ISignal, Signal } from '@lumino/signaling';

import type { IAskView } from './askview';
import { addTurn, atEnd } from './cost';
import { errorText, isKnown } from './protocol';
import { reviewOf } from './question';
import type {
  AnyMessage,
  IAskEnd,
  IAskReused,
  IAskStart,
  IRequestSent,
  IStepEnd,
  IStepStart,
  IUsage,
  IWaitingForUser,
  WaitingKind
} from './protocol';
import type { IRecordedAsk } from './records';

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

/**
 * The asks of one notebook, in the order they started.
 */
export class Conversation {
  /** A conversation holding `asks` (kept from an earlier page load, conversationstore.ts). */
  constructor(asks: readonly IAskView[] = []) {
    this._asks.push(...asks);
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
    if (msg.cell_id === null) {
      return; // an ask no cell asked: the comm shows none
    }
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
    if (msg.cell_id === null) {
      return; // a reuse no cell asked: the comm shows none
    }
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

  private readonly _asks: IAskView[] = [];
  private readonly _changed = new Signal<this, void>(this);
}
