/**
 * A line diff of two cell sources (the old source and the one the model proposes), for the
 * edit review: the longest common subsequence of their lines, written here (a cell is small)
 * rather than a dependency.
 */

export type DiffKind = 'same' | 'added' | 'removed';

/** One line of a diff: kept, added by the new source, or removed from the old one. */
export interface IDiffLine {
  kind: DiffKind;
  text: string;
}

/**
 * Past this many line pairs (after the common start and end are cut) the middle is shown
 * as removed then added: an LCS table that large would hold up the page.
 */
export const MAX_PAIRS = 4_000_000;

/** Split a source into lines ('' is no line at all). */
export function splitLines(source: string): string[] {
  return source === '' ? [] : source.split('\n');
}

/** The lines of `old` and `new` in order, each kept, removed or added. */
export function lineDiff(oldSource: string, newSource: string): IDiffLine[] {
  const a = splitLines(oldSource);
  const b = splitLines(newSource);
  let start = 0;
  while (start < a.length && start < b.length && a[start] === b[start]) {
    start++;
  }
  let endA = a.length;
  let endB = b.length;
  while (endA > start && endB > start && a[endA - 1] === b[endB - 1]) {
    endA--;
    endB--;
  }
  const same = (text: string): IDiffLine => ({ kind: 'same', text });
  return [
    ...a.slice(0, start).map(same),
    ...middle(a.slice(start, endA), b.slice(start, endB)),
    ...a.slice(endA).map(same)
  ];
}

/** The diff of two runs of lines that share no first or last line. */
function middle(a: string[], b: string[]): IDiffLine[] {
  if (a.length * b.length > MAX_PAIRS || a.length === 0 || b.length === 0) {
    return [
      ...a.map((text): IDiffLine => ({ kind: 'removed', text })),
      ...b.map((text): IDiffLine => ({ kind: 'added', text }))
    ];
  }
  const table = lcsTable(a, b);
  const out: IDiffLine[] = [];
  let i = 0;
  let j = 0;
  while (i < a.length && j < b.length) {
    if (a[i] === b[j]) {
      out.push({ kind: 'same', text: a[i] });
      i++;
      j++;
    } else if (table[i + 1][j] >= table[i][j + 1]) {
      out.push({ kind: 'removed', text: a[i++] });
    } else {
      out.push({ kind: 'added', text: b[j++] });
    }
  }
  a.slice(i).forEach(text => out.push({ kind: 'removed', text }));
  b.slice(j).forEach(text => out.push({ kind: 'added', text }));
  return out;
}

/** table[i][j]: the length of the longest common subsequence of a[i:] and b[j:]. */
function lcsTable(a: string[], b: string[]): Uint32Array[] {
  const table = Array.from({ length: a.length + 1 }, () => new Uint32Array(b.length + 1));
  for (let i = a.length - 1; i >= 0; i--) {
    for (let j = b.length - 1; j >= 0; j--) {
      table[i][j] =
        a[i] === b[j] ? table[i + 1][j + 1] + 1 : Math.max(table[i + 1][j], table[i][j + 1]);
    }
  }
  return table;
}

/** How many lines a diff adds and removes. */
export function diffCounts(lines: readonly IDiffLine[]): { added: number; removed: number } {
  let added = 0;
  let removed = 0;
  for (const line of lines) {
    added += line.kind === 'added' ? 1 : 0;
    removed += line.kind === 'removed' ? 1 : 0;
  }
  return { added, removed };
}
