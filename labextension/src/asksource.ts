/**
 * The source of the `%%ask` cell the panel inserts.
 */

/** Return the source of an `%%ask` cell: the prompt below the magic line. */
export function askSource(prompt: string, model: string | null): string {
  const magic = model ? `%%ask -m ${model}` : '%%ask';
  return `${magic}\n${wrapLines(prompt.trim())}`;
}

/** The longest line the panel writes into an `%%ask` cell: the cell stays readable. */
export const WRAP_COLUMN = 88;

/**
 * Break lines longer than `width` at spaces (the model reads the words the same); lines
 * the user broke stay as they are, and a word longer than a line is not cut.
 */
export function wrapLines(text: string, width: number = WRAP_COLUMN): string {
  return text
    .split('\n')
    .map(line => {
      if (line.length <= width) {
        return line;
      }
      const out: string[] = [];
      let current = '';
      for (const word of line.split(' ')) {
        if (current && current.length + 1 + word.length > width) {
          out.push(current);
          current = word;
        } else {
          current = current ? `${current} ${word}` : word;
        }
      }
      out.push(current);
      return out.join('\n');
    })
    .join('\n');
}
