/**
 * Whether a notebook's kernel runs in a box (docs/sandbox.md), in the words the status bar and
 * the panel show, and which refused hosts to offer: once per host and notebook.
 */
import type { IBoxStatus } from './api';

/** The command that gives a notebook's next kernel all the user's rights. */
export const UNBOX_LABEL = 'Run this notebook unboxed';
/** The command that boxes a notebook's kernels again. */
export const BOX_LABEL = 'Run this notebook boxed';

/** What unboxing gives up, said before it is done. */
export const UNBOX_WARNING =
  'Its kernel restarts without a box, and its variables are lost. The code an ask runs there ' +
  'will have all your rights: every file of yours (~/.ssh, ~/.aws and other secrets ' +
  'included) and the whole network, so a CSV or a web page the model reads could steer it ' +
  `to send them anywhere. "${BOX_LABEL}" boxes it again.`;

/** What boxing again changes, said before it is done. */
export const BOX_NOTE =
  'Its kernel restarts in a box, and its variables are lost. Code there reads and writes ' +
  "Jupyter's folder, reads the rest of your home without its secrets, and reaches only " +
  'the package index and the hosts you allow.';

/** The status bar's word for a kernel ('' when the server did not say). */
export function badgeText(status: IBoxStatus | null): string {
  if (status === null) {
    return '';
  }
  return status.boxed ? 'Boxed' : 'Unboxed';
}

/** The status bar's tooltip and the panel's line: what the box means for this kernel. */
export function boxLine(status: IBoxStatus | null): string {
  if (status === null) {
    return '';
  }
  if (!status.boxed) {
    const why = status.reason ? ` (${status.reason})` : '';
    return (
      `Unboxed${why}: the code an ask runs here has all your rights (your files, ~/.ssh and ` +
      `other secrets, the network).` +
      (status.may_unbox ? ` "${BOX_LABEL}" boxes it.` : '')
    );
  }
  const hosts = status.network.length
    ? `only ${status.network.slice(0, 3).join(', ')}${status.network.length > 3 ? ', …' : ''}`
    : 'no host';
  return (
    "Boxed: code here reads and writes Jupyter's folder, reads the rest of your home " +
    `without its secrets, and reaches ${hosts} on the network.`
  );
}

/** The notification's words for a refused host. */
export function refusedText(notebook: string, host: string): string {
  const name = notebook.split('/').pop() || notebook;
  return `The box of ${name} refused a connection to ${host}: it reaches only the hosts you allow.`;
}

/** The hosts already offered to allow, per notebook (for this page's life). */
export class HostOffers {
  /** Return the refused hosts not offered yet for `notebook`, and remember them. */
  take(notebook: string, refused: readonly string[]): string[] {
    const fresh = refused.filter(host => !this._offered.has(`${notebook}\n${host}`));
    for (const host of fresh) {
      this._offered.add(`${notebook}\n${host}`);
    }
    return [...new Set(fresh)];
  }

  private readonly _offered = new Set<string>();
}
