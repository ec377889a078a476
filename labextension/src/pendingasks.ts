/**
 * Asks sent from the panel or the ask command: the `%%ask` cell is inserted and run, and the
 * notebook's conversation shows the prompt at once, pending until the kernel starts the ask
 * (comm.ts), or failed when the cell ran without starting one.
 */
import type { NotebookPanel } from '@jupyterlab/notebook';

import { askSource } from './asksource';
import type { IAskInserted } from './commands';
import type { Conversations } from './conversationstore';

/** What a pending ask whose cell ran without starting an ask says. */
export const NOT_STARTED =
  'The %%ask cell ran without starting an ask: see its output in the notebook.';

/** Insert an `%%ask` cell with this source into a notebook and run it (commands.ts). */
export type InsertAsk = (panel: NotebookPanel, source: string) => IAskInserted | null;

/** Sends asks into notebooks and keeps each one pending in its notebook's conversation. */
export class PendingAsks {
  constructor(
    private readonly _conversations: Conversations,
    private readonly _insert: InsertAsk
  ) {}

  /**
   * Insert an `%%ask` cell with this prompt (and model, else the server's default) into the
   * notebook and run it; return the inserted cell, or null when none could be inserted.
   */
  readonly ask = (
    panel: NotebookPanel,
    prompt: string,
    model: string | null
  ): IAskInserted | null => {
    const inserted = this._insert(panel, askSource(prompt, model));
    if (inserted !== null) {
      const conversation = this._conversations.get(panel.context);
      conversation.addPending(inserted.cellId, prompt.trim(), model ?? '');
      // Settling an ask that started changes nothing: only a pending entry fails.
      void inserted.done.then(() => conversation.settlePending(inserted.cellId, NOT_STARTED));
    }
    return inserted;
  };
}
