package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

type filerProvider struct{}

func newProvider() provider.Provider { return filerProvider{} }

func (filerProvider) Metadata(_ context.Context, _ provider.MetadataRequest, resp *provider.MetadataResponse) {
	resp.TypeName = "filer"
}

func (filerProvider) Schema(context.Context, provider.SchemaRequest, *provider.SchemaResponse) {}

func (filerProvider) Configure(context.Context, provider.ConfigureRequest, *provider.ConfigureResponse) {
}

func (filerProvider) Resources(context.Context) []func() resource.Resource {
	return []func() resource.Resource{func() resource.Resource { return fileResource{} }}
}

func (filerProvider) DataSources(context.Context) []func() datasource.DataSource { return nil }

// fileResource is filer_file: a file at path holding content. With
// refuse_destroy set its destroy fails, as a provider that cannot destroy
// what it created does.
type fileResource struct{}

type fileModel struct {
	ID            types.String `tfsdk:"id"`
	Path          types.String `tfsdk:"path"`
	Content       types.String `tfsdk:"content"`
	RefuseDestroy types.Bool   `tfsdk:"refuse_destroy"`
}

func (fileResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_file"
}

func (fileResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	replace := []planmodifier.String{stringplanmodifier.RequiresReplace()}
	resp.Schema = schema.Schema{Attributes: map[string]schema.Attribute{
		"id":             schema.StringAttribute{Computed: true, PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()}},
		"path":           schema.StringAttribute{Required: true, PlanModifiers: replace},
		"content":        schema.StringAttribute{Required: true, PlanModifiers: replace},
		"refuse_destroy": schema.BoolAttribute{Optional: true},
	}}
}

func (fileResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var m fileModel
	if resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...); resp.Diagnostics.HasError() {
		return
	}
	path := m.Path.ValueString()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		resp.Diagnostics.AddError("creating the file's directory", err.Error())
		return
	}
	if err := os.WriteFile(path, []byte(m.Content.ValueString()), 0o644); err != nil {
		resp.Diagnostics.AddError("writing the file", err.Error())
		return
	}
	m.ID = types.StringValue(path)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

func (fileResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var m fileModel
	if resp.Diagnostics.Append(req.State.Get(ctx, &m)...); resp.Diagnostics.HasError() {
		return
	}
	content, err := os.ReadFile(m.Path.ValueString())
	if errors.Is(err, os.ErrNotExist) {
		resp.State.RemoveResource(ctx)
		return
	}
	if err != nil {
		resp.Diagnostics.AddError("reading the file", err.Error())
		return
	}
	m.Content = types.StringValue(string(content))
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

// Update only changes refuse_destroy: path and content force a replacement.
func (fileResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var m fileModel
	if resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...); resp.Diagnostics.HasError() {
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

func (fileResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var m fileModel
	if resp.Diagnostics.Append(req.State.Get(ctx, &m)...); resp.Diagnostics.HasError() {
		return
	}
	if m.RefuseDestroy.ValueBool() {
		resp.Diagnostics.AddError("refusing to destroy", fmt.Sprintf("%s has refuse_destroy set", m.Path.ValueString()))
		return
	}
	if err := os.Remove(m.Path.ValueString()); err != nil && !errors.Is(err, os.ErrNotExist) {
		resp.Diagnostics.AddError("removing the file", err.Error())
	}
}
