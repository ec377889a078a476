/**
 * The kernel's ask messages, built for tests.
 */
import type { IAskEnd, IAskStart, IStepEnd, IStepStart } from '../src/protocol';

export function askStart(cellId: string, askId: string, prompt = 'plot it'): IAskStart {
  return {
    type: 'ask_start',
    ask_id: askId,
    cell_id: cellId,
    prompt,
    model: 'openai:m',
    replace_ask_id: null,
    execution_count: 1
  };
}

export function stepStart(askId: string, step: number, attempt: number): IStepStart {
  return {
    type: 'step_start',
    ask_id: askId,
    step,
    attempt,
    code: 'x = 1',
    kind: 'code',
    package: ''
  };
}

export function stepEnd(askId: string, step: number, status: IStepEnd['status']): IStepEnd {
  return {
    type: 'step_end',
    ask_id: askId,
    step,
    attempt: 1,
    status,
    execution_count: 2,
    duration_ms: 250,
    error: status === 'ok' ? null : { ename: 'NameError', evalue: "name 'y' is not defined" }
  };
}

export function askEnd(askId: string, status: IAskEnd['status'], answer: string): IAskEnd {
  return {
    type: 'ask_end',
    ask_id: askId,
    status,
    answer,
    error: null,
    record: null,
    unresolved: null,
    steps: 0,
    tokens: 0
  };
}
