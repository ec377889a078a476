/**
 * SVG outputs shown as images, trusted or not.
 *
 * JupyterLab already shows a trusted SVG as an `<img>` with a data URL, where it cannot
 * run script or load anything; it refuses an untrusted one ("Cannot display an untrusted
 * SVG"). Generated cells are untrusted (trust.ts), and a matplotlib SVG chart must still
 * show: an SVG inside an `<img>` is inert either way, so this renderer is safe.
 */
import type { IRenderMime } from '@jupyterlab/rendermime';
import { Widget } from '@lumino/widgets';

export const SVG_MIME = 'image/svg+xml';

/** Return the data URL of an SVG document, adding the SVG namespace an `<img>` needs. */
export function svgDataUrl(source: string): string {
  const svg = /<svg[^>]+xmlns=[^>]+svg/.test(source)
    ? source
    : source.replace('<svg', '<svg xmlns="http://www.w3.org/2000/svg"');
  return `data:${SVG_MIME},${encodeURIComponent(svg)}`;
}

/** Render an SVG output as an image. */
export class InertSVG extends Widget implements IRenderMime.IRenderer {
  constructor(options: IRenderMime.IRendererOptions) {
    super();
    this._mimeType = options.mimeType;
    this.addClass('jp-RenderedSVG');
    this.addClass('jp-RenderedImage');
  }

  async renderModel(model: IRenderMime.IMimeModel): Promise<void> {
    const source = model.data[this._mimeType];
    this.node.textContent = '';
    if (typeof source !== 'string' || !source) {
      return;
    }
    const img = document.createElement('img');
    img.src = svgDataUrl(source);
    const metadata = model.metadata[this._mimeType];
    if (typeof metadata === 'object' && metadata !== null && !Array.isArray(metadata)) {
      const { width, height } = metadata as { width?: unknown; height?: unknown };
      if (typeof width === 'number') {
        img.width = width;
      }
      if (typeof height === 'number') {
        img.height = height;
      }
    }
    this.node.appendChild(img);
  }

  private readonly _mimeType: string;
}

/** The factory that replaces JupyterLab's SVG renderer: safe, so untrusted SVG shows too. */
export const inertSvgRendererFactory: IRenderMime.IRendererFactory = {
  safe: true,
  mimeTypes: [SVG_MIME],
  defaultRank: 80,
  createRenderer: options => new InertSVG(options)
};
