/**
 * Answer the kernel's own questions from this page. The kernel reads an answer with
 * `raw_input(question)`: a stdin `input_request` whose prompt is the question (it starts
 * with "jupyter-ci: "), which JupyterLab shows as a Stdin box in the `%%ask` cell. The page
 * captures those requests on the notebook's kernel connection, replies to one by its prompt
 * (with the captured request's header), and hides the box it caused, so the user is not
 * asked twice. question.ts answers every kind of question (steps, plans, edits) with it.
 */
import type { ISessionContext } from '@jupyterlab/apputils';
import type { Kernel, KernelMessage as KM } from '@jupyterlab/services';
import type { IDisposable } from '@lumino/disposable';
import { ISignal, Signal } from '@lumino/signaling';

import { KernelFollower } from './kernelfollower';

/** Every question jupyter-ci puts on stdin starts so (jupyter_ci/agent/approval.py). */
export const QUESTION_PREFIX = 'jupyter-ci: ';

/** The header a reply names as its parent: the input_request's own. */
export type InputHeader = KM.IInputReplyMsg['parent_header'];

/** An input_request of the kernel that asks a jupyter-ci question. */
export interface IInputRequest {
  prompt: string;
  header: InputHeader;
}

/**
 * Return the question a message of the kernel connection asks (a received stdin
 * input_request whose prompt starts with QUESTION_PREFIX), else null.
 */
export function questionOf(args: Kernel.IAnyMessageArgs): IInputRequest | null {
  const msg = args.msg;
  if (
    args.direction !== 'recv' ||
    msg.channel !== 'stdin' ||
    msg.header.msg_type !== 'input_request'
  ) {
    return null;
  }
  const prompt = (msg.content as { prompt?: unknown }).prompt;
  if (typeof prompt !== 'string' || !prompt.startsWith(QUESTION_PREFIX)) {
    return null;
  }
  return { prompt, header: msg.header as unknown as InputHeader };
}

/** Return the request a sent input_reply answers (its parent's msg_id), else null. */
export function repliedTo(args: Kernel.IAnyMessageArgs): string | null {
  const msg = args.msg;
  if (args.direction !== 'send' || msg.header.msg_type !== 'input_reply') {
    return null;
  }
  const parent = msg.parent_header as { msg_id?: unknown } | undefined;
  return typeof parent?.msg_id === 'string' ? parent.msg_id : null;
}

/** Input requests still waiting for a reply, by prompt (the latest one of each prompt). */
export class PendingInputs {
  /** Keep a request (it replaces an older one with the same prompt). */
  add(request: IInputRequest): void {
    this._byPrompt.set(request.prompt, request.header);
  }

  /** Take the request with this prompt out, if one waits. */
  take(prompt: string): InputHeader | null {
    const header = this._byPrompt.get(prompt) ?? null;
    this._byPrompt.delete(prompt);
    return header;
  }

  has(prompt: string): boolean {
    return this._byPrompt.has(prompt);
  }

  /** Forget the request answered by a reply sent from elsewhere (the Stdin box). */
  forgetReplied(msgId: string): void {
    for (const [prompt, header] of this._byPrompt) {
      if (header.msg_id === msgId) {
        this._byPrompt.delete(prompt);
      }
    }
  }

  clear(): void {
    this._byPrompt.clear();
  }

  private readonly _byPrompt = new Map<string, InputHeader>();
}

/**
 * Hide the Stdin boxes under `root` whose prompt is `prompt`; return how many were found.
 * The input is disabled as well: a hidden box with the focus must not send a reply.
 */
export function hideStdinBoxes(root: ParentNode, prompt: string): number {
  let found = 0;
  for (const item of Array.from(root.querySelectorAll<HTMLElement>('.jp-OutputArea-stdin-item'))) {
    const shown = item.querySelector('.jp-Stdin-prompt');
    if (shown === null || shown.textContent !== prompt) {
      continue;
    }
    found++;
    item.classList.add(ANSWERED_CLASS);
    item.style.display = 'none';
    const input = item.querySelector<HTMLInputElement>('.jp-Stdin-input');
    if (input !== null) {
      input.disabled = true;
      input.blur();
    }
  }
  return found;
}

/** The class of a Stdin box this page answers itself. */
export const ANSWERED_CLASS = 'jp-ci-stdin-answered';

/**
 * The jupyter-ci questions a notebook's kernel asks on stdin, captured as they come, and the
 * replies this page gives them.
 */
export class StdinAnswers implements IDisposable {
  constructor(session: ISessionContext) {
    this._follower = new KernelFollower(session, {
      attach: kernel => kernel.anyMessage.connect(this._onMessage, this),
      detach: kernel => {
        this._pending.clear();
        if (!kernel.isDisposed) {
          kernel.anyMessage.disconnect(this._onMessage, this);
        }
      },
      status: (_, status) => {
        if (status === 'restarting' || status === 'autorestarting' || status === 'dead') {
          this._pending.clear(); // the kernel no longer waits for them
        }
      }
    });
  }

  /** Emitted with the prompt of each question the kernel asks on stdin. */
  get requested(): ISignal<this, string> {
    return this._requested;
  }

  /** Whether the kernel waits for an answer to this question now. */
  waits(prompt: string): boolean {
    return this._pending.has(prompt);
  }

  /** Reply to the question `prompt` with `value`; false when the kernel does not wait for it. */
  reply(prompt: string, value: string): boolean {
    const kernel = this._follower.kernel;
    const header = this._pending.take(prompt);
    if (kernel === null || kernel.isDisposed || header === null) {
      return false;
    }
    kernel.sendInputReply({ status: 'ok', value }, header);
    return true;
  }

  get isDisposed(): boolean {
    return this._follower.isDisposed;
  }

  dispose(): void {
    this._follower.dispose();
    Signal.clearData(this);
  }

  private _onMessage(_: Kernel.IKernelConnection, args: Kernel.IAnyMessageArgs): void {
    const request = questionOf(args);
    if (request !== null) {
      this._pending.add(request);
      this._requested.emit(request.prompt);
      return;
    }
    const answered = repliedTo(args);
    if (answered !== null) {
      this._pending.forgetReplied(answered);
    }
  }

  private readonly _follower: KernelFollower;
  private readonly _pending = new PendingInputs();
  private readonly _requested = new Signal<this, string>(this);
}
