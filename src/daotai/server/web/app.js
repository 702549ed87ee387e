// daotai web console: a director's desk in the browser.
// Plain modern JavaScript, no build step; talks only to the service's public HTTP API.
"use strict";

const I18N = {
  en: {
    app_title: "daotai · director's desk", example: "Example", load_example: "Load example",
    import: "Import JSON", export: "Export JSON", undo: "Undo", redo: "Redo",
    script: "Script", scene: "Scene", characters: "Characters", shots: "Shots", run: "Run",
    add_character: "Add character", add_shot: "Add shot", backend: "Backend", preset: "Preset",
    submit: "Render", queue: "Queue", title: "Title", fps: "Frames per second", size: "Size (WxH)",
    scene_name: "Scene name", description: "Description", time_of_day: "Time of day",
    id: "ID", name: "Name", appearance: "Appearance", colour: "Colour", delete: "Delete",
    duplicate: "Duplicate", shot_id: "Shot ID", duration: "Duration (s)", subject: "Subject",
    framing: "Framing", angle: "Angle", camera: "Camera move", fov: "Field of view (°)",
    action: "Action", prompt: "Prompt", preview: "Quick preview", script_size: "script's own size",
    valid: "Script is valid", invalid: "{n} problem(s) in the script", checking: "Checking…",
    server_down: "Cannot reach the server", status_queued: "queued", status_in_progress: "rendering",
    status_completed: "done", status_failed: "failed", status_cancelled: "cancelled", cancel: "Cancel",
    sequence: "Sequence", clips: "Shot clips", contact_sheet: "Contact sheet", qc: "Quality report",
    downloads: "Downloads", qc_passed: "All checks passed", qc_failed: "Some checks failed",
    cam_ok: "the camera moved as planned", cam_bad: "the camera did not follow the plan",
    cam_none: "camera not checked", cam_error: "off by {e} px per frame on average", shot_ok: "looks fine", preview_running: "Rendering preview… {p}%",
    none: "(none)", drag: "Drag to reorder", diagram: "Top-down camera diagram",
    reference_images: "Reference images", upload_image: "Upload image", drop_here: "or drop PNG / JPEG / WebP here",
    remove: "Remove", uploading: "Uploading {name}…", reference_n: "Reference image {n}",
  },
  zh: {
    app_title: "导演台 · daotai", example: "示例", load_example: "载入示例",
    import: "导入 JSON", export: "导出 JSON", undo: "撤销", redo: "重做",
    script: "剧本", scene: "场景", characters: "角色", shots: "镜头", run: "渲染",
    add_character: "添加角色", add_shot: "添加镜头", backend: "后端", preset: "预设",
    submit: "开始渲染", queue: "队列", title: "标题", fps: "帧率", size: "尺寸（宽x高）",
    scene_name: "场景名", description: "描述", time_of_day: "时间",
    id: "编号", name: "名字", appearance: "外貌", colour: "颜色", delete: "删除",
    duplicate: "复制", shot_id: "镜头编号", duration: "时长（秒）", subject: "主体",
    framing: "景别", angle: "角度", camera: "运镜", fov: "视场角（°）",
    action: "动作", prompt: "提示词", preview: "快速预览", script_size: "剧本自身尺寸",
    valid: "剧本有效", invalid: "剧本有 {n} 处问题", checking: "检查中…",
    server_down: "无法连接服务器", status_queued: "排队中", status_in_progress: "渲染中",
    status_completed: "完成", status_failed: "失败", status_cancelled: "已取消", cancel: "取消",
    sequence: "成片", clips: "分镜片段", contact_sheet: "联系表", qc: "质检报告",
    downloads: "下载", qc_passed: "全部检查通过", qc_failed: "部分检查未通过",
    cam_ok: "摄像机按计划运动", cam_bad: "摄像机未按计划运动",
    cam_none: "未检查摄像机", cam_error: "平均每帧偏差 {e} 像素", shot_ok: "正常", preview_running: "正在渲染预览… {p}%",
    none: "（无）", drag: "拖动以排序", diagram: "俯视机位图",
    reference_images: "参考图", upload_image: "上传图片", drop_here: "或将 PNG / JPEG / WebP 拖放到此处",
    remove: "移除", uploading: "正在上传 {name}…", reference_n: "参考图 {n}",
  },
};

// Chinese labels for the canonical vocabulary (the values sent are always the canonical names).
const VOCAB_ZH = {
  extreme_close_up: "大特写", close_up: "特写", medium_close_up: "近景", medium: "中景",
  medium_full: "中全景", full: "全景", wide: "远景", extreme_wide: "大远景",
  eye_level: "平视", high: "俯拍", low: "仰拍", birds_eye: "鸟瞰", worms_eye: "虫视", dutch: "荷兰角",
  static: "固定", pan: "摇", tilt: "俯仰摇", roll: "滚转", dolly: "推拉", truck: "横移", pedestal: "升降",
  crane: "摇臂", orbit: "环绕", zoom: "变焦", dolly_zoom: "希区柯克变焦", handheld: "手持", follow: "跟拍",
  dawn: "黎明", morning: "早晨", day: "白天", afternoon: "下午", dusk: "黄昏", night: "夜晚", interior: "室内",
};

const VOCAB_FALLBACK = {
  framing: ["extreme_close_up", "close_up", "medium_close_up", "medium", "medium_full", "full", "wide", "extreme_wide"],
  angle: ["eye_level", "high", "low", "birds_eye", "worms_eye", "dutch"],
  camera: ["static", "pan", "tilt", "roll", "dolly", "truck", "pedestal", "crane", "orbit", "zoom", "dolly_zoom", "handheld", "follow"],
  time_of_day: ["dawn", "morning", "day", "afternoon", "dusk", "night", "interior"],
};

const TERMINAL = new Set(["completed", "failed", "cancelled"]);
const PALETTE = ["#3366cc", "#cc3333", "#339966", "#cc9933", "#9933cc", "#33a3cc"];

const state = {
  script: { title: "Untitled", shots: [{ shot_id: "s01", duration: 2 }] },
  lang: localStorage.getItem("daotai.lang") === "zh" ? "zh" : "en",
  vocab: VOCAB_FALLBACK, backends: ["previz"], presets: ["preview", "draft", "final"],
  undo: [], redo: [], lastPush: 0, issues: [], diagrams: {}, jobs: {}, previews: {},
  refStatus: {}, // character id → {text, kind} of its latest upload
};

const UPLOAD_REF = /^upload:(img_[0-9a-f]{32})$/;
const REFERENCE_TYPES = ["image/png", "image/jpeg", "image/webp"];

// ------------------------------------------------------------------ small helpers

/** Translate a UI key in the current language, filling {name} slots. */
function t(key, vars = {}) {
  const text = (I18N[state.lang] && I18N[state.lang][key]) || I18N.en[key] || key;
  return text.replace(/\{(\w+)\}/g, (_, k) => String(vars[k] ?? ""));
}

/** The label of a vocabulary value: canonical name, plus Chinese in Chinese mode. */
function vocabLabel(value) {
  const plain = value.replace(/_/g, " ");
  return state.lang === "zh" && VOCAB_ZH[value] ? `${VOCAB_ZH[value]} · ${plain}` : plain;
}

/** Create an element with attributes and children (strings become text nodes, never HTML). */
function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") node.className = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else if (k === "dataset") Object.assign(node.dataset, v);
    else if (k in node && k !== "list") node[k] = v;
    else node.setAttribute(k, v === true ? "" : v);
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

/** Split a JSON path like `shots[2].camera.fov` into keys ["shots", 2, "camera", "fov"]. */
function splitPath(path) {
  const keys = [];
  path.replace(/\[(\d+)\]|([^.[\]]+)/g, (_, index, name) => { keys.push(index !== undefined ? Number(index) : name); });
  return keys;
}

function getPath(obj, path) {
  return splitPath(path).reduce((o, k) => (o === undefined || o === null ? undefined : o[k]), obj);
}

/** Set a value at a JSON path, creating objects on the way; undefined deletes the key. */
function setPath(obj, path, value) {
  const keys = splitPath(path);
  let node = obj;
  for (const key of keys.slice(0, -1)) {
    if (node[key] === undefined || node[key] === null || typeof node[key] !== "object") node[key] = {};
    node = node[key];
  }
  const last = keys[keys.length - 1];
  if (value === undefined) delete node[last];
  else node[last] = value;
}

/** Debounce: run `fn` once `ms` after the last call. */
function debounce(fn, ms) {
  let timer = null;
  return (...args) => { clearTimeout(timer); timer = setTimeout(() => fn(...args), ms); };
}

async function api(method, url, body) {
  const init = { method, headers: {} };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const response = await fetch(url, init);
  const type = response.headers.get("content-type") || "";
  const data = type.includes("json") ? await response.json() : await response.text();
  return { ok: response.ok, status: response.status, data };
}

// ------------------------------------------------------------------ script state, undo/redo

/** Bring shorthand forms into the shapes the editor edits (camera as an object, size as text). */
function normalise(script) {
  const copy = JSON.parse(JSON.stringify(script));
  if (!Array.isArray(copy.shots)) copy.shots = [];
  if (!Array.isArray(copy.characters)) copy.characters = [];
  if (typeof copy.scene === "string") copy.scene = { name: copy.scene };
  if (copy.size && typeof copy.size === "object") copy.size = `${copy.size.width}x${copy.size.height}`;
  for (const shot of copy.shots) {
    if (typeof shot.camera === "string") shot.camera = { type: shot.camera };
  }
  return copy;
}

/** Record the script before a change; edits within 600 ms of each other are one undo step. */
function remember(coalesce = false) {
  const now = Date.now();
  if (!coalesce || now - state.lastPush > 600) {
    state.undo.push(JSON.stringify(state.script));
    if (state.undo.length > 200) state.undo.shift();
  }
  state.lastPush = now;
  state.redo = [];
  updateUndoButtons();
}

function updateUndoButtons() {
  document.getElementById("undo-btn").disabled = state.undo.length === 0;
  document.getElementById("redo-btn").disabled = state.redo.length === 0;
}

function undo() {
  if (!state.undo.length) return;
  state.redo.push(JSON.stringify(state.script));
  state.script = JSON.parse(state.undo.pop());
  state.lastPush = 0;
  changed(true);
}

function redo() {
  if (!state.redo.length) return;
  state.undo.push(JSON.stringify(state.script));
  state.script = JSON.parse(state.redo.pop());
  state.lastPush = 0;
  changed(true);
}

/** Replace the whole script (import, example), as one undoable step. */
function replaceScript(script) {
  remember();
  state.script = normalise(script);
  changed(true);
}

/** After any change: optionally rebuild the editor, then validate (debounced) and save a draft. */
function changed(rebuild) {
  if (rebuild) renderEditor();
  updateUndoButtons();
  localStorage.setItem("daotai.draft", JSON.stringify(state.script));
  setStatus(t("checking"), "");
  validateSoon();
}

// ------------------------------------------------------------------ validation and plan

const validateSoon = debounce(validate, 350);
let validateSeq = 0;

async function validate() {
  const seq = ++validateSeq;
  let reply;
  try {
    reply = await api("POST", "/v1/scripts/validate", state.script);
  } catch (err) {
    setStatus(t("server_down"), "bad");
    return;
  }
  if (seq !== validateSeq) return; // a newer edit is already being checked
  state.issues = (reply.data && reply.data.issues) || [];
  showIssues();
  if (state.issues.length === 0) {
    setStatus(t("valid"), "ok");
    refreshDiagrams();
  } else {
    setStatus(t("invalid", { n: state.issues.length }), "bad");
  }
}

function setStatus(text, kind) {
  const node = document.getElementById("validation-status");
  node.textContent = text;
  node.className = `status ${kind}`;
  node.dataset.state = kind || "checking";
}

/** The input that best matches an issue path: the exact field, else its nearest parent. */
function inputFor(path) {
  let keys = splitPath(path);
  while (keys.length) {
    const candidate = keys.map((k) => (typeof k === "number" ? `[${k}]` : `.${k}`)).join("").replace(/^\./, "");
    const node = document.querySelector(`[data-path="${CSS.escape(candidate)}"]`);
    if (node) return node;
    keys = keys.slice(0, -1);
  }
  return document.querySelector('[data-path="title"]');
}

function showIssues() {
  for (const node of document.querySelectorAll(".invalid")) {
    node.classList.remove("invalid");
    node.removeAttribute("aria-invalid");
  }
  for (const node of document.querySelectorAll(".issue")) node.remove();
  for (const issue of state.issues) {
    const input = inputFor(issue.path);
    if (!input) continue;
    input.classList.add("invalid");
    input.setAttribute("aria-invalid", "true");
    const holder = input.closest(".field") || input.parentElement;
    holder.append(el("span", { class: "issue", dataset: { issue: issue.path } }, `${issue.path}: ${issue.rule}`));
  }
}

let planSeq = 0;
async function refreshDiagrams() {
  const seq = ++planSeq;
  let reply;
  try {
    reply = await api("POST", "/v1/plan", state.script);
  } catch (err) {
    return;
  }
  if (seq !== planSeq || !reply.ok || !reply.data.valid) return;
  state.diagrams = {};
  for (const shot of reply.data.shots) state.diagrams[shot.shot_id] = shot;
  for (const canvas of document.querySelectorAll("canvas.diagram")) drawDiagram(canvas);
}

/** Draw a top-down view (x right, +z down the page): characters, camera path, start/end, fov wedge. */
function drawDiagram(canvas) {
  const data = state.diagrams[canvas.dataset.shot];
  const ctx = canvas.getContext("2d");
  const scale = window.devicePixelRatio || 1;
  canvas.width = 240 * scale;
  canvas.height = 180 * scale;
  ctx.setTransform(scale, 0, 0, scale, 0, 0);
  ctx.clearRect(0, 0, 240, 180);
  if (!data) return;
  const points = [...data.path, data.start.position, data.end.position].map((p) => [p[0], p[2]]);
  for (const c of data.characters) points.push(c.position);
  const xs = points.map((p) => p[0]);
  const zs = points.map((p) => p[1]);
  const span = Math.max(Math.max(...xs) - Math.min(...xs), Math.max(...zs) - Math.min(...zs), 1.0) * 1.5;
  const cx = (Math.max(...xs) + Math.min(...xs)) / 2;
  const cz = (Math.max(...zs) + Math.min(...zs)) / 2;
  const k = Math.min(240, 180) / span;
  const at = (x, z) => [120 + (x - cx) * k, 90 + (z - cz) * k];
  ctx.strokeStyle = "#eee";
  ctx.lineWidth = 1;
  for (let g = Math.floor(cx - span); g <= cx + span; g += 1) {
    const [gx] = at(g, 0);
    ctx.beginPath(); ctx.moveTo(gx, 0); ctx.lineTo(gx, 180); ctx.stroke();
  }
  for (let g = Math.floor(cz - span); g <= cz + span; g += 1) {
    const [, gz] = at(0, g);
    ctx.beginPath(); ctx.moveTo(0, gz); ctx.lineTo(240, gz); ctx.stroke();
  }
  const colours = {};
  (state.script.characters || []).forEach((c, i) => { colours[c.id] = typeof c.colour === "string" ? c.colour : PALETTE[i % PALETTE.length]; });
  for (const c of data.characters) {
    const [x, y] = at(c.position[0], c.position[1]);
    ctx.fillStyle = colours[c.id] || "#888";
    ctx.beginPath(); ctx.arc(x, y, c.id === data.subject ? 8 : 6, 0, 2 * Math.PI); ctx.fill();
    const yaw = (c.facing * Math.PI) / 180; // facing 0 looks toward +z, 90 toward +x
    ctx.strokeStyle = "#333";
    ctx.beginPath(); ctx.moveTo(x, y); ctx.lineTo(x + Math.sin(yaw) * 12, y + Math.cos(yaw) * 12); ctx.stroke();
    ctx.fillStyle = "#333";
    ctx.font = "11px sans-serif";
    ctx.fillText(c.id, x + 9, y - 6);
  }
  // camera path
  ctx.strokeStyle = "#b0342a";
  ctx.setLineDash([4, 3]);
  ctx.beginPath();
  data.path.forEach((p, i) => { const [x, y] = at(p[0], p[2]); if (i) ctx.lineTo(x, y); else ctx.moveTo(x, y); });
  const [ex, ey] = at(data.end.position[0], data.end.position[2]);
  ctx.lineTo(ex, ey);
  ctx.stroke();
  ctx.setLineDash([]);
  drawCamera(ctx, at, data.start, data.aspect, "rgba(176,52,42,0.12)", false);
  drawCamera(ctx, at, data.end, data.aspect, "rgba(176,52,42,0.25)", true);
}

/** One camera: a wedge of its horizontal field of view and a marker (hollow start, filled end). */
function drawCamera(ctx, at, pose, aspect, fill, filled) {
  const [x, y] = at(pose.position[0], pose.position[2]);
  const half = Math.atan(Math.tan((pose.fov * Math.PI) / 360) * aspect); // horizontal half-angle
  const heading = Math.atan2(pose.forward[1], pose.forward[0]);
  const reach = 60;
  ctx.fillStyle = fill;
  ctx.beginPath();
  ctx.moveTo(x, y);
  ctx.lineTo(x + Math.cos(heading - half) * reach, y + Math.sin(heading - half) * reach);
  ctx.lineTo(x + Math.cos(heading + half) * reach, y + Math.sin(heading + half) * reach);
  ctx.closePath();
  ctx.fill();
  ctx.strokeStyle = "#b0342a";
  ctx.beginPath(); ctx.moveTo(x, y); ctx.lineTo(x + Math.cos(heading) * 20, y + Math.sin(heading) * 20); ctx.stroke();
  ctx.beginPath(); ctx.arc(x, y, 5, 0, 2 * Math.PI);
  if (filled) { ctx.fillStyle = "#b0342a"; ctx.fill(); } else { ctx.stroke(); }
}

// ------------------------------------------------------------------ editor

/** An input bound to a JSON path of the script. kind: text | number | textarea | color | select. */
function bound(path, kind, options = {}) {
  const value = getPath(state.script, path);
  let input;
  if (kind === "select") {
    input = el("select", {});
    if (options.allowEmpty) input.append(el("option", { value: "" }, t("none")));
    for (const choice of options.choices) input.append(el("option", { value: choice }, options.label ? options.label(choice) : choice));
    input.value = value ?? (options.allowEmpty ? "" : options.fallback ?? options.choices[0]);
  } else if (kind === "textarea") {
    input = el("textarea", { rows: 2 });
    input.value = value ?? "";
  } else {
    input = el("input", { type: kind === "color" ? "color" : kind === "number" ? "number" : "text", step: kind === "number" ? "any" : undefined, placeholder: options.placeholder });
    input.value = kind === "color" ? (typeof value === "string" && /^#[0-9a-f]{6}$/i.test(value) ? value : options.fallback || "#888888") : value ?? "";
  }
  input.dataset.path = path;
  const onEdit = () => {
    remember(true);
    let next = input.value;
    if (kind === "number") next = input.value.trim() === "" ? undefined : Number.isFinite(Number(input.value)) ? Number(input.value) : input.value;
    else if (next === "" && (options.allowEmpty || options.optional)) next = undefined;
    setPath(state.script, path, next);
    changed(options.rebuild === true);
  };
  input.addEventListener(kind === "select" || kind === "color" ? "change" : "input", onEdit);
  return el("label", { class: `field ${options.cls || ""}` }, el("span", {}, t(options.key || path.split(".").pop())), input);
}

function renderEditor() {
  const scriptFields = document.getElementById("script-fields");
  scriptFields.replaceChildren(
    bound("title", "text", { cls: "wide" }),
    bound("fps", "number", { cls: "narrow", placeholder: "24" }),
    bound("size", "text", { optional: true, placeholder: "1280x720" }),
  );
  if (!state.script.scene || typeof state.script.scene !== "object") state.script.scene = {};
  document.getElementById("scene-fields").replaceChildren(
    bound("scene.name", "text", { key: "scene_name", optional: true }),
    bound("scene.time_of_day", "select", { key: "time_of_day", choices: state.vocab.time_of_day, allowEmpty: true, label: vocabLabel }),
    bound("scene.description", "textarea", { key: "description", cls: "wide", optional: true }),
  );
  renderCharacters();
  renderShots();
  showIssues();
}

function renderCharacters() {
  const list = document.getElementById("character-list");
  list.replaceChildren(...state.script.characters.map((c, i) => el("div", { class: "card", dataset: { kind: "character", index: i } },
    el("div", { class: "fields" },
      bound(`characters[${i}].id`, "text", { key: "id", cls: "narrow", rebuild: false }),
      bound(`characters[${i}].name`, "text", { key: "name", optional: true }),
      bound(`characters[${i}].colour`, "color", { key: "colour", fallback: PALETTE[i % PALETTE.length] }),
      bound(`characters[${i}].appearance`, "textarea", { key: "appearance", cls: "wide", optional: true }),
      el("button", { type: "button", class: "delete-character", onclick: () => { remember(); state.script.characters.splice(i, 1); changed(true); } }, t("delete")),
    ),
    referencePanel(c, i))));
}

// ------------------------------------------------------------------ reference images

/** A character's reference images: thumbnails with remove buttons, then an upload button that is also a drop zone. */
function referencePanel(character, i) {
  const refs = Array.isArray(character.reference_images) ? character.reference_images : [];
  const input = el("input", { type: "file", class: "ref-file", hidden: true, multiple: true, accept: REFERENCE_TYPES.join(","),
    onchange: (e) => { const files = [...e.target.files]; e.target.value = ""; uploadReferences(character.id, i, files); } });
  const zone = el("div", { class: "dropzone" },
    el("button", { type: "button", class: "upload-ref", onclick: () => input.click() }, t("upload_image")),
    el("span", { class: "hint" }, t("drop_here")), input);
  zone.addEventListener("dragover", (e) => { e.preventDefault(); e.dataTransfer.dropEffect = "copy"; zone.classList.add("drag-over"); });
  zone.addEventListener("dragleave", () => zone.classList.remove("drag-over"));
  zone.addEventListener("drop", (e) => {
    e.preventDefault();
    zone.classList.remove("drag-over");
    uploadReferences(character.id, i, [...(e.dataTransfer ? e.dataTransfer.files : [])]);
  });
  const thumbs = refs.map((ref, j) => {
    const match = typeof ref === "string" ? UPLOAD_REF.exec(ref) : null;
    // A path from an imported script cannot be shown (the server reads no paths): its name stands in.
    const picture = match
      ? el("img", { src: `/v1/uploads/${match[1]}/content`, alt: t("reference_n", { n: j + 1 }), width: 96, height: 96 })
      : el("span", { class: "ref-name" }, String(ref));
    return el("figure", { class: match ? "ref-thumb" : "ref-thumb missing", dataset: { ref: String(ref) } }, picture,
      el("button", { type: "button", class: "remove-ref", onclick: () => removeReference(i, j) }, t("remove")));
  });
  const status = state.refStatus[character.id];
  return el("div", { class: "field refs", dataset: { path: `characters[${i}].reference_images` } },
    el("span", {}, t("reference_images")),
    el("div", { class: "ref-row" }, ...thumbs, zone),
    status ? el("span", { class: `ref-status ${status.kind}` }, status.text) : null);
}

/** Upload files one by one; each stored image is added to the character as `upload:<id>` (one undo step each). */
async function uploadReferences(characterId, index, files) {
  for (const file of files) {
    state.refStatus[characterId] = { text: t("uploading", { name: file.name }), kind: "" };
    renderCharacters();
    showIssues();
    let reply;
    try {
      const form = new FormData();
      form.append("file", file, file.name);
      const response = await fetch("/v1/uploads", { method: "POST", body: form });
      reply = { ok: response.ok, status: response.status, data: await response.json().catch(() => null) };
    } catch (err) {
      reply = { ok: false, data: null, status: t("server_down") };
    }
    if (!reply.ok) {
      const message = reply.data && reply.data.error ? reply.data.error.message : String(reply.status);
      state.refStatus[characterId] = { text: `${file.name}: ${message}`, kind: "error" };
      renderCharacters();
      showIssues();
      continue;
    }
    delete state.refStatus[characterId];
    // Find the character again: the script may have changed while the file was on its way.
    const character = state.script.characters.find((c) => c.id === characterId) || state.script.characters[index];
    if (!character) continue;
    remember();
    const refs = Array.isArray(character.reference_images) ? character.reference_images : [];
    if (!refs.includes(reply.data.reference)) refs.push(reply.data.reference);
    character.reference_images = refs;
    changed(true);
  }
}

function removeReference(i, j) {
  const character = state.script.characters[i];
  remember();
  character.reference_images.splice(j, 1);
  if (character.reference_images.length === 0) delete character.reference_images;
  changed(true);
}

function renderShots() {
  const list = document.getElementById("shot-list");
  const ids = state.script.characters.map((c) => c.id).filter(Boolean);
  list.replaceChildren(...state.script.shots.map((shot, i) => {
    if (!shot.camera || typeof shot.camera !== "object") shot.camera = { type: typeof shot.camera === "string" ? shot.camera : "static" };
    const canvas = el("canvas", { class: "diagram", dataset: { shot: shot.shot_id || "" }, title: t("diagram"), "aria-label": t("diagram") });
    const previewBox = el("div", { class: "preview", dataset: { shot: shot.shot_id || "" } });
    renderPreview(previewBox);
    // Only the handle starts a drag, so selecting text inside the inputs still works.
    const handle = el("span", { class: "handle", title: t("drag") }, "⠿");
    const card = el("div", { class: "card shot", dataset: { index: i } },
      handle,
      el("div", { class: "body" },
        el("div", { class: "fields" },
          bound(`shots[${i}].shot_id`, "text", { key: "shot_id", cls: "narrow" }),
          bound(`shots[${i}].duration`, "number", { key: "duration", cls: "narrow", placeholder: "4" }),
          bound(`shots[${i}].subject`, "select", { key: "subject", choices: ids, allowEmpty: true }),
          bound(`shots[${i}].framing`, "select", { key: "framing", choices: state.vocab.framing, fallback: "medium", label: vocabLabel }),
          bound(`shots[${i}].angle`, "select", { key: "angle", choices: state.vocab.angle, fallback: "eye_level", label: vocabLabel }),
          bound(`shots[${i}].camera.type`, "select", { key: "camera", choices: state.vocab.camera, fallback: "static", label: vocabLabel }),
          bound(`shots[${i}].camera.fov`, "number", { key: "fov", cls: "narrow", placeholder: "60" }),
        ),
        el("div", { class: "fields" },
          bound(`shots[${i}].action`, "textarea", { key: "action", cls: "wide", optional: true }),
          bound(`shots[${i}].prompt`, "textarea", { key: "prompt", cls: "wide", optional: true }),
        ),
        el("div", { class: "card-actions" },
          el("button", { type: "button", class: "duplicate-shot", onclick: () => duplicateShot(i) }, t("duplicate")),
          el("button", { type: "button", class: "delete-shot", disabled: state.script.shots.length <= 1, onclick: () => { remember(); state.script.shots.splice(i, 1); changed(true); } }, t("delete")),
          el("button", { type: "button", class: "preview-shot", onclick: () => previewShot(i) }, t("preview")),
        ),
      ),
      el("div", { class: "side" }, canvas, previewBox),
    );
    card.addEventListener("dragstart", (e) => { card.classList.add("dragging"); e.dataTransfer.setData("text/plain", String(i)); e.dataTransfer.effectAllowed = "move"; });
    handle.addEventListener("mousedown", () => { card.draggable = true; });
    handle.addEventListener("mouseup", () => { card.draggable = false; });
    card.addEventListener("dragend", () => { card.classList.remove("dragging"); card.draggable = false; });
    card.addEventListener("dragover", (e) => { e.preventDefault(); card.classList.add("drop-target"); });
    card.addEventListener("dragleave", () => card.classList.remove("drop-target"));
    card.addEventListener("drop", (e) => { e.preventDefault(); card.classList.remove("drop-target"); moveShot(Number(e.dataTransfer.getData("text/plain")), i); });
    drawDiagram(canvas);
    return card;
  }));
}

function uniqueShotId(base) {
  const taken = new Set(state.script.shots.map((s) => s.shot_id));
  for (let n = 2; ; n += 1) {
    const candidate = `${base}_${n}`;
    if (!taken.has(candidate)) return candidate;
  }
}

function duplicateShot(i) {
  remember();
  const copy = JSON.parse(JSON.stringify(state.script.shots[i]));
  copy.shot_id = uniqueShotId(copy.shot_id || "shot");
  state.script.shots.splice(i + 1, 0, copy);
  changed(true);
}

function moveShot(from, to) {
  if (!Number.isInteger(from) || from === to || from < 0 || from >= state.script.shots.length) return;
  remember();
  const [shot] = state.script.shots.splice(from, 1);
  state.script.shots.splice(to, 0, shot);
  changed(true);
}

// ------------------------------------------------------------------ runs

function buildSelectors() {
  const backend = document.getElementById("backend-select");
  const keep = backend.value || "previz";
  backend.replaceChildren(...state.backends.map((b) => el("option", { value: b }, b)));
  backend.value = state.backends.includes(keep) ? keep : state.backends[0];
  const preset = document.getElementById("preset-select");
  const keepPreset = preset.value;
  preset.replaceChildren(el("option", { value: "" }, t("script_size")), ...state.presets.map((p) => el("option", { value: p }, p)));
  preset.value = keepPreset;
}

async function submitJob(script, backend, preset) {
  const query = new URLSearchParams({ backend });
  if (preset) query.set("preset", preset);
  return api("POST", `/v1/jobs?${query}`, script);
}

async function submitRun() {
  const error = document.getElementById("submit-error");
  error.hidden = true;
  const reply = await submitJob(state.script, document.getElementById("backend-select").value, document.getElementById("preset-select").value);
  if (!reply.ok) {
    error.hidden = false;
    error.textContent = reply.data && reply.data.error ? reply.data.error.message : String(reply.status);
    if (reply.data && reply.data.issues) { state.issues = reply.data.issues; showIssues(); }
    return;
  }
  const ids = JSON.parse(localStorage.getItem("daotai.jobs") || "[]");
  ids.unshift(reply.data.id);
  localStorage.setItem("daotai.jobs", JSON.stringify(ids.slice(0, 20)));
  trackJob(reply.data.id, reply.data);
}

/** Follow a job: show it now, then refresh it on every server-sent event until it ends. */
function trackJob(id, initial) {
  const entry = { id, job: initial || null, node: el("div", { class: "job", dataset: { job: id } }), source: null, qc: null };
  state.jobs[id] = entry;
  document.getElementById("job-list").prepend(entry.node);
  renderJob(entry);
  refreshJob(entry);
  const source = new EventSource(`/v1/jobs/${id}/events`);
  entry.source = source;
  const refresh = debounce(() => refreshJob(entry), 100);
  for (const kind of ["status", "progress", "planned", "output", "notice"]) source.addEventListener(kind, refresh);
  // The server closes the stream when the job ends; stop the browser from reconnecting then.
  source.onerror = () => { if (entry.job && TERMINAL.has(entry.job.status)) source.close(); else refresh(); };
}

async function refreshJob(entry) {
  const reply = await api("GET", `/v1/jobs/${entry.id}`);
  if (!reply.ok) return;
  entry.job = reply.data;
  if (TERMINAL.has(entry.job.status)) {
    if (entry.source) entry.source.close();
    if (entry.job.status === "completed" && entry.qc === null && entry.job.outputs.some((o) => o.name === "qc")) {
      const qc = await api("GET", `/v1/jobs/${entry.id}/files/qc`);
      entry.qc = qc.ok ? qc.data : false;
    }
  }
  renderJob(entry);
}

function progressRow(label, percent, cls) {
  return [
    el("span", {}, label),
    el("div", { class: "bar-outer" }, (() => { const inner = el("div", { class: `bar-inner ${cls || ""}` }); inner.style.width = `${percent}%`; return inner; })()),
    el("span", { class: "percent" }, `${percent}%`),
  ];
}

function renderJob(entry) {
  const job = entry.job;
  const node = entry.node;
  if (!job) { node.replaceChildren(el("span", {}, entry.id)); return; }
  const head = el("div", { class: "job-head" },
    el("strong", {}, job.id.slice(0, 14)),
    el("span", { class: "job-status", dataset: { status: job.status } }, t(`status_${job.status}`)),
    el("div", { class: "bar-outer" }, (() => { const inner = el("div", { class: "bar-inner" }); inner.style.width = `${job.progress}%`; return inner; })()),
    el("span", { class: "job-progress", dataset: { progress: job.progress } }, `${job.progress}%`),
    TERMINAL.has(job.status) ? null : el("button", { type: "button", onclick: () => api("DELETE", `/v1/jobs/${job.id}`).then(() => refreshJob(entry)) }, t("cancel")),
  );
  const shots = el("div", { class: "shot-progress" }, ...job.shots.flatMap((s) => progressRow(s.shot_id, s.frames ? Math.round((100 * s.done) / s.frames) : 0)));
  const parts = [head, shots];
  if (job.error) parts.push(el("p", { class: "error" }, `${job.error.code}: ${job.error.message}`));
  if (job.status === "completed") parts.push(renderResults(entry));
  node.replaceChildren(...parts);
}

function fileUrl(job, name) {
  return `/v1/jobs/${job.id}/files/${encodeURIComponent(name)}`;
}

function renderResults(entry) {
  const job = entry.job;
  const names = new Set(job.outputs.map((o) => o.name));
  const player = el("div", { class: "sequence" }, el("h3", {}, t("sequence")),
    names.has("video") ? el("video", { class: "sequence-player", controls: true, preload: "metadata", src: fileUrl(job, "video") }) : null);
  const clips = el("div", {}, el("h3", {}, t("clips")), el("div", { class: "clips" },
    ...job.outputs.filter((o) => o.kind === "shot").map((o) => el("figure", {},
      el("video", { controls: true, preload: "metadata", src: fileUrl(job, o.name) }), el("figcaption", {}, o.shot_id)))));
  const contact = names.has("contact_sheet")
    ? el("div", { class: "contact" }, el("h3", {}, t("contact_sheet")), el("img", { src: fileUrl(job, "contact_sheet"), alt: t("contact_sheet") }))
    : null;
  const downloads = el("div", {}, el("h3", {}, t("downloads")), el("ul", { class: "downloads" },
    ...job.outputs.map((o) => el("li", {}, el("a", { href: fileUrl(job, o.name), download: "", dataset: { output: o.name } }, o.name), ` (${(o.bytes / 1024).toFixed(1)} KiB)`))));
  return el("div", { class: "results" }, player, clips, contact, renderQc(entry.qc), downloads);
}

/** The qc report in plain words: pass/fail overall, and per shot whether the camera did what was planned. */
function renderQc(qc) {
  if (!qc) return null;
  const items = (qc.shots || []).map((shot) => {
    const cam = shot.camera;
    let camText = t("cam_none");
    if (cam) {
      const error = typeof cam.error_mean_px === "number" ? ` (${t("cam_error", { e: cam.error_mean_px.toFixed(2) })})` : "";
      camText = `${cam.ok === false ? t("cam_bad") : t("cam_ok")}${error}`;
    }
    // The camera verdict is said in plain words above; the rest of the failures follow as qc wrote them.
    const others = (shot.failures || []).filter((f) => !f.startsWith("camera:"));
    return el("li", { class: shot.ok ? "qc-ok" : "qc-bad", dataset: { shot: shot.shot_id, camera: cam ? String(cam.ok) : "none" } },
      el("strong", {}, `${shot.shot_id}: `), el("span", { class: cam && cam.ok === false ? "qc-bad" : "" }, camText),
      others.length ? el("span", { class: "qc-other" }, ` · ${others.join("; ")}`) : ` · ${t("shot_ok")}`);
  });
  return el("div", { class: "qc" }, el("h3", {}, t("qc")),
    el("p", { class: qc.ok ? "qc-ok" : "qc-bad" }, qc.ok ? t("qc_passed") : t("qc_failed")),
    el("ul", { class: "qc-list" }, ...items));
}

/** Quick preview: the one shot alone at the small preset through previz, shown in its card. */
async function previewShot(i) {
  const shot = state.script.shots[i];
  const script = { ...JSON.parse(JSON.stringify(state.script)), shots: [JSON.parse(JSON.stringify(shot))] };
  delete script.shots[0].transition;
  const reply = await submitJob(script, "previz", "preview");
  const id = shot.shot_id;
  if (!reply.ok) {
    state.previews[id] = { error: reply.data && reply.data.error ? reply.data.error.message : String(reply.status) };
    updatePreview(id);
    return;
  }
  state.previews[id] = { job: reply.data };
  updatePreview(id);
  const poll = async () => {
    const status = await api("GET", `/v1/jobs/${reply.data.id}`);
    if (!status.ok) return;
    state.previews[id] = { job: status.data };
    updatePreview(id);
    if (!TERMINAL.has(status.data.status)) setTimeout(poll, 500);
  };
  setTimeout(poll, 300);
}

function updatePreview(shotId) {
  for (const box of document.querySelectorAll(`.preview[data-shot="${CSS.escape(shotId)}"]`)) renderPreview(box);
}

function renderPreview(box) {
  const preview = state.previews[box.dataset.shot];
  if (!preview) { box.replaceChildren(); return; }
  if (preview.error) { box.replaceChildren(el("span", { class: "error" }, preview.error)); return; }
  const job = preview.job;
  if (job.status === "completed") {
    box.replaceChildren(el("video", { class: "preview-video", controls: true, autoplay: true, muted: true, loop: true, src: fileUrl(job, "video") }));
  } else if (TERMINAL.has(job.status)) {
    box.replaceChildren(el("span", { class: "error" }, job.error ? job.error.message : job.status));
  } else {
    box.replaceChildren(el("span", {}, t("preview_running", { p: job.progress })));
  }
}

// ------------------------------------------------------------------ language, import/export, start-up

function applyLanguage() {
  document.documentElement.lang = state.lang === "zh" ? "zh-CN" : "en";
  for (const node of document.querySelectorAll("[data-i18n]")) node.textContent = t(node.dataset.i18n);
  document.getElementById("lang-btn").textContent = state.lang === "zh" ? "English" : "中文";
  buildSelectors();
  renderEditor();
  for (const entry of Object.values(state.jobs)) renderJob(entry);
  validate();
}

function toggleLanguage() {
  state.lang = state.lang === "zh" ? "en" : "zh";
  localStorage.setItem("daotai.lang", state.lang);
  applyLanguage();
}

async function loadExample() {
  const name = document.getElementById("example-select").value;
  const reply = await api("GET", `examples/${encodeURIComponent(name)}.json`);
  if (reply.ok) replaceScript(typeof reply.data === "string" ? JSON.parse(reply.data) : reply.data);
}

function exportScript() {
  const blob = new Blob([JSON.stringify(state.script, null, 2) + "\n"], { type: "application/json" });
  const url = URL.createObjectURL(blob);
  const name = `${(state.script.title || "script").replace(/[^\w\u4e00-\u9fff-]+/g, "_")}.json`;
  const link = el("a", { href: url, download: name });
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}

async function importScript(file) {
  try {
    replaceScript(JSON.parse(await file.text()));
  } catch (err) {
    setStatus(`${file.name}: ${err.message}`, "bad");
  }
}

async function start() {
  try {
    const reply = await api("GET", "/v1/schema");
    if (reply.ok) {
      state.vocab = { ...VOCAB_FALLBACK, ...reply.data.vocabulary };
      state.backends = reply.data.backends;
      state.presets = reply.data.presets;
    }
  } catch (err) { /* the fallback vocabulary still lets the page work */ }
  const draft = localStorage.getItem("daotai.draft");
  if (draft) { try { state.script = normalise(JSON.parse(draft)); } catch (err) { /* keep the default */ } }
  else state.script = normalise(state.script);
  document.getElementById("load-example").addEventListener("click", loadExample);
  document.getElementById("import-btn").addEventListener("click", () => document.getElementById("import-file").click());
  document.getElementById("import-file").addEventListener("change", (e) => { if (e.target.files[0]) importScript(e.target.files[0]); e.target.value = ""; });
  document.getElementById("export-btn").addEventListener("click", exportScript);
  document.getElementById("undo-btn").addEventListener("click", undo);
  document.getElementById("redo-btn").addEventListener("click", redo);
  document.getElementById("lang-btn").addEventListener("click", toggleLanguage);
  document.getElementById("add-character").addEventListener("click", () => {
    remember();
    const n = state.script.characters.length + 1;
    state.script.characters.push({ id: `char_${n}`, colour: PALETTE[(n - 1) % PALETTE.length] });
    changed(true);
  });
  document.getElementById("add-shot").addEventListener("click", () => {
    remember();
    state.script.shots.push({ shot_id: uniqueShotId("s"), duration: 2, camera: { type: "static" } });
    changed(true);
  });
  document.getElementById("submit-btn").addEventListener("click", submitRun);
  // A file dropped beside a drop zone must not make the browser navigate away to it.
  for (const kind of ["dragover", "drop"]) {
    window.addEventListener(kind, (e) => { if (e.dataTransfer && [...e.dataTransfer.types].includes("Files")) e.preventDefault(); });
  }
  document.addEventListener("keydown", (e) => {
    if (!(e.ctrlKey || e.metaKey) || ["INPUT", "TEXTAREA"].includes(document.activeElement.tagName)) return;
    if (e.key === "z" && !e.shiftKey) { e.preventDefault(); undo(); }
    else if (e.key === "y" || (e.key === "z" && e.shiftKey)) { e.preventDefault(); redo(); }
  });
  applyLanguage();
  updateUndoButtons();
  for (const id of JSON.parse(localStorage.getItem("daotai.jobs") || "[]").slice(0, 5).reverse()) {
    const probe = await api("GET", `/v1/jobs/${id}`).catch(() => null);
    if (probe && probe.ok) trackJob(id, probe.data);
  }
  document.body.dataset.ready = "true";
}

document.addEventListener("DOMContentLoaded", start);
