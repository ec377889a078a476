/**
 * Approval of a step or a plan, as plain data: which questions the page answers itself, and
 * the answers it sends (the JSON forms `jupyter_ci.agent.approval.parse_answer` reads).
 * approvalcontrol.ts shows them and sends them; install questions stay the Stdin box's.
 */
import type { IWaitingForUser } from './protocol';
import { QUESTION_PREFIX } from './stdinreply';

/** A step or a plan the kernel waits on the user's approval for. */
export interface IApprovalQuestion {
  askId: string;
  kind: 'step' | 'plan';
  /** The stdin prompt the answer replies to. */
  question: string;
  /** For a step: its number and attempt (a fix is a later attempt), and its code. */
  step: number;
  attempt: number;
  code: string;
  /** For a plan: the numbered plan the model proposes. */
  plan: string;
}

/** What the user decides: run it (as proposed or edited), skip it, stop the ask. */
export type ApprovalAction = 'run' | 'skip' | 'stop';

/** The approval question a waiting_for_user message asks, or null (an install, edits). */
export function approvalOf(msg: IWaitingForUser): IApprovalQuestion | null {
  if ((msg.kind !== 'step' && msg.kind !== 'plan') || !msg.question.startsWith(QUESTION_PREFIX)) {
    return null;
  }
  return {
    askId: msg.ask_id,
    kind: msg.kind,
    question: msg.question,
    step: typeof msg.step === 'number' ? msg.step : 0,
    attempt: typeof msg.attempt === 'number' ? msg.attempt : 1,
    code: typeof msg.code === 'string' ? msg.code : '',
    plan: typeof msg.plan === 'string' ? msg.plan : ''
  };
}

/**
 * The answer to a step: run (the code as it stands now in its cell: `edit` with that code
 * when the user changed it), skip or stop.
 */
export function stepAnswer(action: ApprovalAction, proposed: string, current: string): string {
  if (action === 'run' && current !== proposed) {
    return JSON.stringify({ decision: 'edit', code: current });
  }
  return JSON.stringify({ decision: action });
}

/** The answer to a plan: approve it (`edit` with the text when the user changed it) or stop. */
export function planAnswer(action: 'run' | 'stop', proposed: string, current: string): string {
  if (action === 'run' && current !== proposed) {
    return JSON.stringify({ decision: 'edit', plan: current });
  }
  return JSON.stringify({ decision: action });
}

/** What the approval bar and the panel say about a waiting question. */
export function approvalText(question: IApprovalQuestion): string {
  if (question.kind === 'plan') {
    return 'The model proposes this plan: edit it if you like, then approve it or stop the ask.';
  }
  const fix = question.attempt > 1 ? ` (a fix, attempt ${question.attempt})` : '';
  const what = 'run it, edit it, skip it or stop the ask';
  return `Step ${question.step}${fix} waits for your approval: ${what}.`;
}
