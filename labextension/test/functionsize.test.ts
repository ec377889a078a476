/**
 * Every function in src stays short: a function-like node (declaration, method, arrow
 * function, function expression, constructor, accessor; React function components are
 * functions too) spans fewer than MAX_LINES lines, its JSDoc left out.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';

import * as ts from 'typescript';

/** A function spans fewer lines than this. */
const MAX_LINES = 60;

// lib-test/test/ -> labextension/src/.
const SRC = join(__dirname, '..', '..', 'src');

/** A function found too long: where, and how many lines. */
interface ILongFunction {
  where: string;
  lines: number;
}

function nameOf(node: ts.Node): string {
  const named = node as { name?: ts.Node };
  if (named.name !== undefined) {
    return named.name.getText();
  }
  const parent = node.parent;
  if (
    ts.isVariableDeclaration(parent) ||
    ts.isPropertyAssignment(parent) ||
    ts.isPropertyDeclaration(parent)
  ) {
    return parent.name.getText();
  }
  return ts.isConstructorDeclaration(node) ? 'constructor' : '(anonymous)';
}

/** The function-like nodes of one source text with their length in lines. */
function functionLengths(fileName: string, text: string): ILongFunction[] {
  const kind = fileName.endsWith('.tsx') ? ts.ScriptKind.TSX : ts.ScriptKind.TS;
  const source = ts.createSourceFile(fileName, text, ts.ScriptTarget.Latest, true, kind);
  const found: ILongFunction[] = [];
  const visit = (node: ts.Node): void => {
    if (ts.isFunctionLike(node) && (node as { body?: ts.Node }).body !== undefined) {
      const first = source.getLineAndCharacterOfPosition(node.getStart(source)).line;
      const last = source.getLineAndCharacterOfPosition(node.getEnd()).line;
      found.push({ where: `${fileName}:${first + 1} ${nameOf(node)}`, lines: last - first + 1 });
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

function sourceFiles(): string[] {
  return readdirSync(SRC).filter(name => /\.tsx?$/.test(name) && !name.endsWith('.d.ts'));
}

describe('function size', () => {
  test(`every function in src is under ${MAX_LINES} lines`, () => {
    const files = sourceFiles();
    assert.ok(files.length > 10, `no sources found in ${SRC}`);
    const long = files
      .flatMap(name => functionLengths(name, readFileSync(join(SRC, name), 'utf-8')))
      .filter(f => f.lines >= MAX_LINES)
      .map(f => `${f.where}: ${f.lines} lines`);
    assert.deepEqual(long, []);
  });

  test('the check sees declarations, methods, arrows and components, and counts their lines', () => {
    const body = (n: number): string => '  x++;\n'.repeat(n);
    const text = [
      `function a() {\n${body(3)}}`,
      `class C {\n  m() {\n${body(1)}  }\n  constructor() {}\n  get g() { return 1; }\n}`,
      `const f = () => {\n${body(58)}};`,
      `const Comp = function (): JSX.Element { return <div />; };`,
      'declare function d(): void;'
    ].join('\n');
    const found = functionLengths('t.tsx', text);
    assert.deepEqual(
      found.map(f => [f.where.replace(/^t\.tsx:\d+ /, ''), f.lines]),
      [['a', 5], ['m', 3], ['constructor', 1], ['g', 1], ['f', 60], ['Comp', 1]]
    );
  });
});
