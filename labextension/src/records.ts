/**
 * Read a notebook's asks back from its cells, for the panel of a browser that never saw them.
 *
 * The ask record in an `%%ask` cell's metadata (docs/protocol.md section 4) is signed by the
 * user's kernel with a secret this page cannot read, so nothing here is verified: the panel
 * shows what is read as plain text only, marked as read from the notebook. A re-run the
 * kernel reuses (it checks the signature first) replaces it with the kernel's own account.
 */
import type { INotebookModel } from '@jupyterlab/notebook';

import { asGeneratedRecord, generatedIds, ICellData } from './cells';
import type { IStepView } from './askview';
import { IAskCost, recordedCost } from './cost';
import { AskStatus, IUnresolved, METADATA_KEY } from './protocol';

/** One ask as its cells recorded it. */
export interface IRecordedAsk {
  cellId: string;
  askId: string;
  prompt: string;
  model: string;
  status: AskStatus;
  /** The answer (Markdown source) of a finished ask; '' for one that failed. */
  answer: string;
  /** Why it failed ('' unless it did). */
  error: string;
  /** ISO time the kernel wrote the record ('' if none). */
  created: string;
  unresolved: IUnresolved | null;
  steps: IStepView[];
  /** Its tokens and price, from the record's `usage` (records before issue 23 have none). */
  cost?: IAskCost | null;
}

/** A cell as plain data: an nbformat cell, or a cell model read out (notebookCells). */
export interface IRecordCell extends ICellData {
  cellType: string;
  source: string;
}

const STATUSES = new Set<string>(['done', 'failed', 'interrupted']);
/** Options of the magic's line that take a value (jupyter_ci/kernel/options.py). */
const VALUED = new Set(['-m', '--model', '--timeout', '--max-steps', '--max-fixes', '--pin']);

/** Read a notebook model's cells as plain data. */
export function notebookCells(model: INotebookModel): IRecordCell[] {
  const cells: IRecordCell[] = [];
  for (let i = 0; i < model.cells.length; i++) {
    const cell = model.cells.get(i);
    cells.push({
      id: cell.id,
      cellType: cell.type,
      source: cell.sharedModel.getSource(),
      metadata: { [METADATA_KEY]: cell.getMetadata(METADATA_KEY) }
    });
  }
  return cells;
}

/** The prompt of an `%%ask` (or `%ask`) source: the cell below the magic's line, or its words. */
export function promptOf(source: string): string {
  const [first, ...rest] = source.split('\n');
  const below = rest.join('\n').trim();
  if (below) {
    return below;
  }
  const words = first.trim().split(/\s+/).slice(1);
  let i = 0;
  while (i < words.length && words[i].startsWith('-')) {
    const word = words[i];
    i += word === '--' ? 1 : VALUED.has(word) ? 2 : 1;
    if (word === '--') {
      break;
    }
  }
  return words.slice(i).join(' ');
}

function text(value: unknown): string {
  return typeof value === 'string' ? value : '';
}

/**
 * The unresolved step of an ask record: `message` is the kernel's sentence, '' in a record
 * of an older version (which had none: the panel then says less, never composes it).
 */
export function unresolvedOf(value: unknown): IUnresolved | null {
  const found = value as { [key: string]: unknown } | null;
  if (typeof found !== 'object' || found === null || typeof found.step !== 'number') {
    return null;
  }
  const names = Array.isArray(found.names)
    ? found.names.filter((name): name is string => typeof name === 'string')
    : [];
  return { step: found.step, error: text(found.error), names, message: text(found.message) };
}

/** The steps of an ask as its generated cells recorded their attempts. */
function stepsOf(cells: readonly IRecordCell[], index: number): IStepView[] {
  const byId = new Map(cells.map(cell => [cell.id, cell]));
  return generatedIds(cells, index).map((id, i) => {
    const record = asGeneratedRecord(byId.get(id)?.metadata?.[METADATA_KEY]);
    const attempts = record?.attempts ?? [];
    const last = attempts.length > 0 ? attempts[attempts.length - 1] : null;
    return {
      step: i + 1,
      attempt: last?.attempt ?? 1,
      status: last?.status ?? 'interrupted',
      failedAttempts: Math.max(0, attempts.length - 1),
      durationS: typeof last?.duration_s === 'number' ? last.duration_s : null,
      error: last?.ename ? `${last.ename}: ${text(last.evalue)}` : null
    };
  });
}

/** The asks of a notebook whose `%%ask` cells hold a record, in notebook order. */
export function recordedAsks(cells: readonly IRecordCell[]): IRecordedAsk[] {
  const asks: IRecordedAsk[] = [];
  cells.forEach((cell, index) => {
    const value = cell.metadata?.[METADATA_KEY];
    if (cell.cellType !== 'code' || typeof value !== 'object' || value === null) {
      return;
    }
    const record = value as { [key: string]: unknown };
    const status = text(record.status);
    if (!text(record.ask_id) || 'step' in record || !STATUSES.has(status)) {
      return;
    }
    const failed = status === 'failed';
    asks.push({
      cellId: cell.id,
      askId: text(record.ask_id),
      prompt: promptOf(cell.source),
      model: text(record.model),
      status: status as AskStatus,
      answer: failed ? '' : text(record.answer),
      error: failed ? text(record.answer) : '',
      created: text(record.created),
      unresolved: unresolvedOf(record.unresolved),
      steps: stepsOf(cells, index),
      cost: recordedCost(record.usage)
    });
  });
  return asks;
}
