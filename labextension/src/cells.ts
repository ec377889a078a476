/**
 * The record rule, on cells as plain data: what the `metadata.jupyter_ci` record of an ask's
 * cells is and how a generated cell's is written, which cells an ask generated (the one rule,
 * docs/protocol.md section 4), the pin in an `%%ask` line, and the code above an ask the
 * kernel checks. The same on a live notebook model is notebookcells.ts; the cells of a
 * running ask are askcells.ts.
 */
import type { PartialJSONObject } from '@lumino/coreutils';

import { IStepEnd, METADATA_KEY, StepStatus } from './protocol';
import type { IWireAskAbove } from './protocol.generated';

/** One entry of a generated cell's `metadata.jupyter_ci.attempts`. */
export interface IAttempt {
  attempt: number;
  status: StepStatus;
  ename: string | null;
  evalue: string | null;
  /** In seconds: the stored format, which older and newer versions read alike. */
  duration_s: number;
  code: string;
}

/** `metadata.jupyter_ci` of a generated cell. */
export interface IGeneratedRecord {
  ask_id: string;
  step: number;
  model: string;
  attempts: IAttempt[];
  interrupted?: boolean;
}

/**
 * An ask cell above an ask, sent with it (`jupyter_ci_frontend.asks_above`): Run All sends
 * every request before the asks above place their steps, so the kernel adds the steps it
 * ran for them since to the stale `above`.
 */
export type IAskAbove = Required<IWireAskAbove>;

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

/** A new step's record: no attempt yet. */
export function newGeneratedRecord(askId: string, step: number, model: string): IGeneratedRecord {
  return { ask_id: askId, step, model, attempts: [] };
}

/** The record as written into the cell's metadata (`interrupted` only when true). */
export function generatedRecordJSON(record: IGeneratedRecord): PartialJSONObject {
  const value: PartialJSONObject = {
    ask_id: record.ask_id,
    step: record.step,
    model: record.model,
    attempts: record.attempts as unknown as PartialJSONObject[]
  };
  if (record.interrupted) {
    value.interrupted = true;
  }
  return value;
}

/** The attempt a step_end reports, as the record stores it (its duration in seconds). */
export function attemptOf(msg: IStepEnd, code: string): IAttempt {
  return {
    attempt: msg.attempt,
    status: msg.status,
    ename: msg.error?.ename ?? null,
    evalue: msg.error?.evalue ?? null,
    duration_s: Math.round(msg.duration_ms) / 1000,
    code
  };
}

/** A cell as plain data (an nbformat cell, or a cell model read out): what the rule reads. */
export interface ICellData {
  id: string;
  metadata?: { readonly [key: string]: unknown };
}

/** Return a cell's `metadata.jupyter_ci` when it is an object with a non-empty `ask_id`. */
function recordOf(cell: ICellData | undefined): { [key: string]: unknown } | null {
  const value = cell?.metadata?.[METADATA_KEY];
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    return null;
  }
  const record = value as { [key: string]: unknown };
  return typeof record.ask_id === 'string' && record.ask_id !== '' ? record : null;
}

/**
 * Ids of the generated cells of the ask cell at `index`, in order (the one rule).
 *
 * An ask cell's record has an `ask_id` and no `step`; a generated cell's has
 * an `ask_id` and an integer `step`. Its generated cells are the later cells
 * generated for the same ask; other cells in between, and pasted copies of the
 * ask cell, are ignored. Their steps must read 1, 2, ..., k, else there are
 * none. A generated cell has none. docs/protocol.md section 4;
 * `jupyter_ci.kernel.record.generated_after` is the kernel's side.
 */
export function generatedIds(cells: readonly ICellData[], index: number): string[] {
  const ask = recordOf(cells[index]);
  if (ask === null || 'step' in ask) {
    return [];
  }
  const ids: string[] = [];
  for (let i = index + 1; i < cells.length; i++) {
    const record = recordOf(cells[i]);
    if (record === null || record.ask_id !== ask.ask_id || !Number.isInteger(record.step)) {
      continue;
    }
    if (record.step !== ids.length + 1) {
      return [];
    }
    ids.push(cells[i].id);
  }
  return ids;
}

/**
 * Put `--pin <pin>` right after `%%ask` (or `%ask`) in the first line of an ask cell's
 * source, replacing an older pin; other sources are returned unchanged.
 */
export function withPin(source: string, pin: string): string {
  const newline = source.indexOf('\n');
  const first = newline < 0 ? source : source.slice(0, newline);
  const rest = newline < 0 ? '' : source.slice(newline);
  const found = /^(\s*%%?ask)\b(.*)$/.exec(first);
  if (found === null || !/^[0-9a-f]+$/.test(pin)) {
    return source;
  }
  const options = found[2].replace(/\s--pin(=|\s+)\S+/g, '');
  return `${found[1]} --pin ${pin}${options}${rest}`;
}

/** The most source text sent with an ask for the kernel's restart check. */
export const MAX_ABOVE_CHARS = 200_000;

/** Tell an `%%ask` or `%ask` cell by its source. */
export function isAskSource(source: string): boolean {
  return /^\s*%%?ask\b/.test(source);
}

/**
 * The sources of the code cells above index `index` (ask cells left out: their code is in
 * their generated cells), for the kernel to tell which names a restart would lose; null
 * when they are more than MAX_ABOVE_CHARS, too many to send with a request.
 */
export function codeAbove(
  cells: ReadonlyArray<{ cellType: string; source: string }>,
  index: number
): string[] | null {
  const sources: string[] = [];
  let total = 0;
  for (const cell of cells.slice(0, Math.max(0, index))) {
    if (cell.cellType !== 'code' || isAskSource(cell.source)) {
      continue;
    }
    total += cell.source.length;
    if (total > MAX_ABOVE_CHARS) {
      return null;
    }
    sources.push(cell.source);
  }
  return sources;
}

/** A cell as plain data, with its type and source. */
export interface ICellSource extends ICellData {
  cellType: string;
  source: string;
}

/**
 * The ask cells above index `index`, each with the ask its record names and where its
 * generated cells are in codeAbove's list: the kernel replaces those with the steps it ran
 * for that ask after this request was sent (Run All sends every request at once).
 */
export function asksAbove(cells: readonly ICellSource[], index: number): IAskAbove[] {
  const before = cells.slice(0, Math.max(0, index));
  const position = new Map<string, number>();
  for (const cell of before) {
    if (cell.cellType === 'code' && !isAskSource(cell.source)) {
      position.set(cell.id, position.size);
    }
  }
  const asks: IAskAbove[] = [];
  before.forEach((cell, i) => {
    if (cell.cellType !== 'code' || !isAskSource(cell.source)) {
      return;
    }
    const record = recordOf(cell);
    const places = generatedIds(before, i).map(id => position.get(id) ?? -1);
    asks.push({
      cell_id: cell.id,
      ask_id: record !== null && !('step' in record) ? (record.ask_id as string) : null,
      cells: places.filter(place => place >= 0)
    });
  });
  return asks;
}

