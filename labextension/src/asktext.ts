/**
 * The words the panel shows for an ask: its status, its steps, what it does now. The kernel
 * words what it decides (an unresolved step's sentence); nothing here composes that.
 */
import type { IAskView, IPhase, IStepView } from './askview';

const STATUS_TEXT: Record<IAskView['status'], string> = {
  pending: 'waiting for the kernel…',
  running: 'running…',
  done: 'done',
  failed: 'failed',
  interrupted: 'interrupted'
};

/** An unresolved step without the kernel's sentence (a record of an older version). */
export const UNRESOLVED_TEXT = 'done · a step still failed';

/** The status of an ask: reused, the kernel's sentence for an unresolved step, or its status. */
export function askStatusText(ask: IAskView): string {
  if (ask.reused) {
    return 'reused';
  }
  if (ask.status === 'done' && ask.unresolved) {
    return ask.unresolved.message || UNRESOLVED_TEXT;
  }
  return STATUS_TEXT[ask.status];
}

/** "step 2 · install pandas · failed → fixed · 1.2 s" */
export function stepText(step: IStepView): string {
  const parts = [`step ${step.step}`];
  if (step.kind === 'install' && step.package) {
    parts.push(`install ${step.package}`);
  }
  if (step.status === 'running') {
    parts.push(step.attempt > 1 ? `running (attempt ${step.attempt})` : 'running');
  } else if (step.status === 'ok') {
    parts.push(step.failedAttempts > 0 ? 'failed → fixed' : 'done');
  } else {
    parts.push(step.status === 'error' ? 'failed' : step.status);
  }
  if (step.durationS !== null) {
    parts.push(`${step.durationS.toFixed(1)} s`);
  }
  return parts.join(' · ');
}

const PHASE_TEXT: Record<IPhase['what'], string> = {
  thinking: 'thinking',
  running: 'running a step',
  writing: 'writing',
  waiting: 'waiting for your answer'
};

/** "thinking · 4 s": what a running ask does now and for how long, at `now`. */
export function phaseText(phase: IPhase, now: number): string {
  const seconds = Math.max(0, Math.floor((now - phase.since) / 1000));
  const approval = phase.what === 'waiting' && (phase.kind === 'step' || phase.kind === 'plan');
  return `${approval ? 'waiting for your approval' : PHASE_TEXT[phase.what]} · ${seconds} s`;
}
