"use strict";(self.rspackChunk_workbench_report_renderer=self.rspackChunk_workbench_report_renderer||[]).push([[232],{475(r,o,t){var e=t(601),n=t.n(e),a=t(314),i=(t.n(a))()(n());i.push([r.id,`/* Workbench report renderer. Only JupyterLab theme variables, so light and dark both work. */

.wb-Report {
  font-family: var(--jp-ui-font-family);
  font-size: var(--jp-ui-font-size1);
  color: var(--jp-ui-font-color1);
}

.wb-Report-toolbar {
  display: flex;
  align-items: center;
  gap: 12px;
  margin-bottom: 6px;
}

.wb-Report-filter {
  min-width: 16em;
  padding: 2px 6px;
  color: var(--jp-ui-font-color1);
  background: var(--jp-input-background);
  border: var(--jp-border-width) solid var(--jp-border-color1);
  border-radius: var(--jp-border-radius);
}

.wb-Report-filter:focus {
  outline: none;
  border-color: var(--jp-brand-color1);
}

.wb-Report-aggregate {
  display: flex;
  align-items: center;
  gap: 4px;
  cursor: pointer;
}

.wb-Report-summary {
  color: var(--jp-ui-font-color2);
}

.wb-Report-scroll {
  max-height: 480px;
  overflow: auto;
}

.wb-Report-table {
  border-collapse: collapse;
  font-family: var(--jp-code-font-family);
  font-size: var(--jp-code-font-size);
}

.wb-Report-table th,
.wb-Report-table td {
  padding: 2px 10px;
  white-space: nowrap;
  text-align: left;
  border-bottom: var(--jp-border-width) solid var(--jp-border-color2);
}

.wb-Report-table thead th {
  position: sticky;
  top: 0;
  background: var(--jp-layout-color2);
  border-bottom: var(--jp-border-width) solid var(--jp-border-color1);
}

.wb-Report-sort {
  padding: 0;
  font: inherit;
  font-weight: 600;
  color: var(--jp-ui-font-color1);
  background: none;
  border: none;
  cursor: pointer;
}

.wb-Report-sorted[aria-sort='descending'] .wb-Report-sort::after {
  content: ' \\25BC';
  color: var(--jp-brand-color1);
}

.wb-Report-sorted[aria-sort='ascending'] .wb-Report-sort::after {
  content: ' \\25B2';
  color: var(--jp-brand-color1);
}

.wb-Report-table tbody tr:hover {
  background: var(--jp-layout-color2);
}

.wb-Report-table td.wb-Report-num {
  text-align: right;
}

/* The Percent cell draws its share as a bar behind the number. */
.wb-Report-table td.wb-Report-percent {
  position: relative;
  min-width: 6em;
}

.wb-Report-bar {
  position: absolute;
  left: 0;
  top: 3px;
  bottom: 3px;
  background: var(--jp-brand-color2);
  opacity: 0.45;
  border-radius: 0 2px 2px 0;
}

.wb-Report-text {
  position: relative;
}

.wb-Report-table tfoot td {
  color: var(--jp-ui-font-color2);
}

.wb-Report-table tfoot tr.wb-Report-sum td {
  border-top: var(--jp-border-width) solid var(--jp-border-color1);
}

.wb-Report-empty {
  color: var(--jp-ui-font-color2);
  font-style: italic;
}

.wb-Report-config {
  margin-top: 8px;
}

.wb-Report-config summary {
  cursor: pointer;
  font-weight: 600;
}

.wb-Report-config dl {
  display: grid;
  grid-template-columns: max-content auto;
  gap: 1px 12px;
  margin: 4px 0 0 12px;
}

.wb-Report-config dt {
  color: var(--jp-ui-font-color2);
}

.wb-Report-config dd {
  margin: 0;
  font-family: var(--jp-code-font-family);
}

.wb-Report-error {
  color: var(--jp-error-color1);
  white-space: pre-wrap;
}
`,""]),t.d(o,{},{A:i})},314(r){r.exports=function(r){var o=[];return o.toString=function(){return this.map(function(o){var t="",e=void 0!==o[5];return o[4]&&(t+="@supports (".concat(o[4],") {")),o[2]&&(t+="@media ".concat(o[2]," {")),e&&(t+="@layer".concat(o[5].length>0?" ".concat(o[5]):""," {")),t+=r(o),e&&(t+="}"),o[2]&&(t+="}"),o[4]&&(t+="}"),t}).join("")},o.i=function(r,t,e,n,a){"string"==typeof r&&(r=[[null,r,void 0]]);var i={};if(e)for(var p=0;p<this.length;p++){var c=this[p][0];null!=c&&(i[c]=!0)}for(var s=0;s<r.length;s++){var l=[].concat(r[s]);e&&i[l[0]]||(void 0!==a&&(void 0===l[5]||(l[1]="@layer".concat(l[5].length>0?" ".concat(l[5]):""," {").concat(l[1],"}")),l[5]=a),t&&(l[2]&&(l[1]="@media ".concat(l[2]," {").concat(l[1],"}")),l[2]=t),n&&(l[4]?(l[1]="@supports (".concat(l[4],") {").concat(l[1],"}"),l[4]=n):l[4]="".concat(n)),o.push(l))}},o}},601(r){r.exports=function(r){return r[1]}},72(r){var o=[];function t(r){for(var t=-1,e=0;e<o.length;e++)if(o[e].identifier===r){t=e;break}return t}function e(r,e){for(var n={},a=[],i=0;i<r.length;i++){var p=r[i],c=e.base?p[0]+e.base:p[0],s=n[c]||0,l="".concat(c," ").concat(s);n[c]=s+1;var d=t(l),u={css:p[1],media:p[2],sourceMap:p[3],supports:p[4],layer:p[5]};if(-1!==d)o[d].references++,o[d].updater(u);else{var b=function(r,o){var t=o.domAPI(o);return t.update(r),function(o){o?(o.css!==r.css||o.media!==r.media||o.sourceMap!==r.sourceMap||o.supports!==r.supports||o.layer!==r.layer)&&t.update(r=o):t.remove()}}(u,e);e.byIndex=i,o.splice(i,0,{identifier:l,updater:b,references:1})}a.push(l)}return a}r.exports=function(r,n){var a=e(r=r||[],n=n||{});return function(r){r=r||[];for(var i=0;i<a.length;i++){var p=t(a[i]);o[p].references--}for(var c=e(r,n),s=0;s<a.length;s++){var l=t(a[s]);0===o[l].references&&(o[l].updater(),o.splice(l,1))}a=c}}},659(r){var o={};r.exports=function(r,t){var e=function(r){if(void 0===o[r]){var t=document.querySelector(r);if(window.HTMLIFrameElement&&t instanceof window.HTMLIFrameElement)try{t=t.contentDocument.head}catch(r){t=null}o[r]=t}return o[r]}(r);if(!e)throw Error("Couldn't find a style target. This probably means that the value for the 'insert' parameter is invalid.");e.appendChild(t)}},540(r){r.exports=function(r){var o=document.createElement("style");return r.setAttributes(o,r.attributes),r.insert(o,r.options),o}},56(r,o,t){r.exports=function(r){var o=t.nc;o&&r.setAttribute("nonce",o)}},825(r){r.exports=function(r){if("u"<typeof document)return{update:function(){},remove:function(){}};var o=r.insertStyleElement(r);return{update:function(t){var e,n,a;e="",t.supports&&(e+="@supports (".concat(t.supports,") {")),t.media&&(e+="@media ".concat(t.media," {")),(n=void 0!==t.layer)&&(e+="@layer".concat(t.layer.length>0?" ".concat(t.layer):""," {")),e+=t.css,n&&(e+="}"),t.media&&(e+="}"),t.supports&&(e+="}"),(a=t.sourceMap)&&"u">typeof btoa&&(e+="\n/*# sourceMappingURL=data:application/json;base64,".concat(btoa(unescape(encodeURIComponent(JSON.stringify(a))))," */")),r.styleTagTransform(e,o,r.options)},remove:function(){var r;null===(r=o).parentNode||r.parentNode.removeChild(r)}}}},113(r){r.exports=function(r,o){if(o.styleSheet)o.styleSheet.cssText=r;else{for(;o.firstChild;)o.removeChild(o.firstChild);o.appendChild(document.createTextNode(r))}}},579(r,o,t){var e=t(72),n=t.n(e),a=t(825),i=t.n(a),p=t(659),c=t.n(p),s=t(56),l=t.n(s),d=t(540),u=t.n(d),b=t(113),f=t.n(b),v=t(475),m={};m.styleTagTransform=f(),m.setAttributes=l(),m.insert=c().bind(null,"head"),m.domAPI=i(),m.insertStyleElement=u(),n()(v.A,m),v.A&&v.A.locals&&v.A.locals}}]);