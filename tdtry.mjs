import * as td from 'typedoc';
const app = await td.Application.bootstrapWithPlugins({}, [new td.TSConfigReader(), new td.TypeDocReader()]);
const project = await app.convert();
console.log(!!project, app.logger.hasWarnings(), Object.keys(app.renderer).slice(0,40).join(' '));
await app.generateOutputs(project);
let r; app.renderer.on(td.RendererEvent.END, (e)=>{ r = app.renderer.router; });
console.log(!!r, r && Object.getOwnPropertyNames(Object.getPrototypeOf(r)).join(' '));
const m = project.getChildByName(['index','CmId','connect']);
console.log(m && r.getFullUrl(m));
